//! Optimizer trajectories on a small quadratic against hand-written f64 re-implementations of
//! PyTorch's update equations, plus state export/import and argument validation.

use tessera_autograd::Var;
use tessera_core::{DType, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::optim::{Adam, AdamConfig, AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig};

type B = Cpu;

fn dev() -> B {
    Cpu::new()
}

/// The problem: `loss = ½ Σ a ⊙ (p - c)²` over one flat parameter, so `∇ = a ⊙ (p - c)`.
const P0: [f64; 5] = [1.0, -2.0, 0.5, 3.0, -0.25];
const A: [f64; 5] = [1.0, 4.0, 0.5, 2.0, 10.0];
const C: [f64; 5] = [0.0, 1.0, -1.0, 2.5, 0.0];
const STEPS: usize = 3;

fn gradient(p: &[f64]) -> Vec<f64> {
    p.iter()
        .zip(A)
        .zip(C)
        .map(|((p, a), c)| a * (p - c))
        .collect()
}

/// A parameter `[5]` (reshaped to `[1, 5]` to exercise non-vector shapes) plus a parameter that
/// never receives a gradient.
struct Problem {
    p: Var<B>,
    unused: Var<B>,
    dtype: DType,
}

impl Problem {
    fn new(dtype: DType) -> Self {
        let t = Tensor::from_vec(P0.to_vec(), [1, 5], &dev()).unwrap();
        Problem {
            p: Var::param(t.to_dtype(dtype).unwrap()),
            unused: Var::param(Tensor::ones([2], dtype, &dev()).unwrap()),
            dtype,
        }
    }

    fn params(&self) -> Vec<(String, Var<B>)> {
        vec![
            ("p".to_string(), self.p.clone()),
            ("unused".to_string(), self.unused.clone()),
        ]
    }

    fn constant(&self, v: &[f64]) -> Var<B> {
        let t = Tensor::from_vec(v.to_vec(), [1, 5], &dev()).unwrap();
        Var::constant(t.to_dtype(self.dtype).unwrap())
    }

    fn backward(&self) {
        let (a, c) = (self.constant(&A), self.constant(&C));
        let loss = self.p.sub(&c).unwrap().square().unwrap().mul(&a).unwrap();
        loss.sum_all()
            .unwrap()
            .mul_scalar(0.5)
            .unwrap()
            .backward()
            .unwrap();
    }

    /// Runs `STEPS` steps and returns the parameter after each.
    fn run(&self, opt: &mut dyn Optimizer<B>) -> Vec<Vec<f64>> {
        (0..STEPS)
            .map(|_| {
                opt.zero_grad();
                self.backward();
                opt.step().unwrap();
                self.p.value().to_vec_f64().unwrap()
            })
            .collect()
    }
}

/// PyTorch's SGD, element-wise in f64.
fn reference_sgd(c: SgdConfig) -> Vec<Vec<f64>> {
    let mut p = P0.to_vec();
    let mut buf: Option<Vec<f64>> = None;
    let mut out = Vec::new();
    for _ in 0..STEPS {
        let mut g: Vec<f64> = gradient(&p)
            .iter()
            .zip(&p)
            .map(|(g, p)| g + c.weight_decay * p)
            .collect();
        if c.momentum != 0.0 {
            let b: Vec<f64> = match &buf {
                None => g.clone(),
                Some(b) => b
                    .iter()
                    .zip(&g)
                    .map(|(b, g)| c.momentum * b + (1.0 - c.dampening) * g)
                    .collect(),
            };
            g = if c.nesterov {
                g.iter().zip(&b).map(|(g, b)| g + c.momentum * b).collect()
            } else {
                b.clone()
            };
            buf = Some(b);
        }
        p = p.iter().zip(&g).map(|(p, g)| p - c.lr * g).collect();
        out.push(p.clone());
    }
    out
}

/// PyTorch's Adam (`decoupled = false`) or AdamW (`decoupled = true`), element-wise in f64.
fn reference_adam(c: AdamConfig, decoupled: bool) -> Vec<Vec<f64>> {
    let (b1, b2) = c.betas;
    let mut p = P0.to_vec();
    let (mut m, mut v, mut vmax) = (vec![0.0; 5], vec![0.0; 5], vec![0.0f64; 5]);
    let mut out = Vec::new();
    for t in 1..=STEPS as i32 {
        let grad = gradient(&p);
        for i in 0..5 {
            let mut g = grad[i];
            if decoupled {
                p[i] *= 1.0 - c.lr * c.weight_decay;
            } else {
                g += c.weight_decay * p[i];
            }
            m[i] = b1 * m[i] + (1.0 - b1) * g;
            v[i] = b2 * v[i] + (1.0 - b2) * g * g;
            vmax[i] = vmax[i].max(v[i]);
            let second = if c.amsgrad { vmax[i] } else { v[i] };
            let bc1 = 1.0 - b1.powi(t);
            let bc2 = 1.0 - b2.powi(t);
            let denom = second.sqrt() / bc2.sqrt() + c.eps;
            p[i] -= c.lr / bc1 * m[i] / denom;
        }
        out.push(p.clone());
    }
    out
}

fn assert_trajectory(actual: &[Vec<f64>], expected: &[Vec<f64>], tol: f64, what: &str) {
    for (step, (a, e)) in actual.iter().zip(expected).enumerate() {
        for (i, (x, y)) in a.iter().zip(e).enumerate() {
            assert!(
                (x - y).abs() <= tol * (1.0 + y.abs()),
                "{what}: step {step} element {i}: got {x}, expected {y}"
            );
        }
    }
}

fn sgd_configs() -> Vec<SgdConfig> {
    vec![
        SgdConfig::new(0.1),
        SgdConfig::new(0.05).momentum(0.9),
        SgdConfig::new(0.05)
            .momentum(0.9)
            .dampening(0.3)
            .weight_decay(0.01),
        SgdConfig::new(0.02)
            .momentum(0.8)
            .nesterov(true)
            .weight_decay(0.1),
    ]
}

fn adam_configs() -> Vec<AdamConfig> {
    let base = AdamConfig::new(0.1);
    vec![
        base,
        AdamConfig {
            weight_decay: 0.1,
            ..base
        },
        AdamConfig {
            betas: (0.5, 0.6),
            eps: 1e-3,
            amsgrad: true,
            weight_decay: 0.05,
            ..base
        },
    ]
}

#[test]
fn sgd_follows_pytorch_in_f64_and_f32() {
    for config in sgd_configs() {
        let expected = reference_sgd(config);
        for (dtype, tol) in [(DType::F64, 1e-14), (DType::F32, 1e-6)] {
            let problem = Problem::new(dtype);
            let mut opt = Sgd::new(problem.params(), config).unwrap();
            let got = problem.run(&mut opt);
            assert_trajectory(&got, &expected, tol, &format!("{config:?} {dtype}"));
            // The parameter without a gradient is untouched and has no state.
            assert_eq!(problem.unused.value().to_vec_f64().unwrap(), vec![1.0, 1.0]);
            assert!(opt.state().iter().all(|(k, _)| !k.starts_with("unused")));
        }
    }
}

#[test]
fn adam_follows_pytorch_in_f64_and_f32() {
    for config in adam_configs() {
        let expected = reference_adam(config, false);
        for (dtype, tol) in [(DType::F64, 1e-13), (DType::F32, 1e-5)] {
            let problem = Problem::new(dtype);
            let mut opt = Adam::new(problem.params(), config).unwrap();
            let got = problem.run(&mut opt);
            assert_trajectory(&got, &expected, tol, &format!("{config:?} {dtype}"));
            assert_eq!(problem.unused.value().to_vec_f64().unwrap(), vec![1.0, 1.0]);
        }
    }
}

#[test]
fn adamw_decouples_weight_decay_like_pytorch() {
    for config in adam_configs() {
        let adamw = AdamWConfig {
            lr: config.lr,
            betas: config.betas,
            eps: config.eps,
            weight_decay: config.weight_decay.max(0.2),
            amsgrad: config.amsgrad,
        };
        let expected = reference_adam(adamw.into(), true);
        let problem = Problem::new(DType::F64);
        let mut opt = AdamW::new(problem.params(), adamw).unwrap();
        assert_trajectory(
            &problem.run(&mut opt),
            &expected,
            1e-13,
            &format!("{adamw:?}"),
        );
        // Coupled and decoupled decay give different trajectories.
        let coupled = reference_adam(adamw.into(), false);
        assert!((coupled[2][0] - expected[2][0]).abs() > 1e-6);
    }
    assert_eq!(AdamWConfig::default().weight_decay, 0.01);
    assert_eq!(AdamConfig::default().betas, (0.9, 0.999));
}

#[test]
fn learning_rate_changes_apply_to_the_next_step() {
    let problem = Problem::new(DType::F64);
    let mut opt = Sgd::new(problem.params(), SgdConfig::new(0.1)).unwrap();
    opt.set_learning_rate(0.0);
    assert_eq!(opt.learning_rate(), 0.0);
    problem.backward();
    opt.step().unwrap();
    assert_eq!(problem.p.value().to_vec_f64().unwrap(), P0.to_vec());
    opt.set_learning_rate(0.5);
    opt.step().unwrap();
    let expected: Vec<f64> = P0
        .iter()
        .zip(gradient(&P0))
        .map(|(p, g)| p - 0.5 * g)
        .collect();
    assert_trajectory(
        &[problem.p.value().to_vec_f64().unwrap()],
        &[expected],
        1e-15,
        "lr",
    );
}

/// Runs two steps, saves, and checks that a fresh optimizer loaded from the state continues
/// exactly like the original.
/// Builds an optimizer over the given named parameters.
type MakeOptimizer<'a> = &'a dyn Fn(Vec<(String, Var<B>)>) -> Box<dyn Optimizer<B>>;

fn check_resume(make: MakeOptimizer, keys: &[&str]) {
    let original = Problem::new(DType::F64);
    let mut opt = make(original.params());
    for _ in 0..2 {
        opt.zero_grad();
        original.backward();
        opt.step().unwrap();
    }
    let state = opt.state();
    let mut names: Vec<&str> = state.iter().map(|(k, _)| k.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, keys);

    let resumed = Problem::new(DType::F64);
    resumed.p.set_value(original.p.value()).unwrap();
    let mut fresh = make(resumed.params());
    fresh.load_state(&state).unwrap();
    for problem_and_opt in [(&original, &mut opt), (&resumed, &mut fresh)] {
        let (problem, opt) = problem_and_opt;
        opt.zero_grad();
        problem.backward();
        opt.step().unwrap();
    }
    assert_eq!(
        original.p.value().to_vec_f64().unwrap(),
        resumed.p.value().to_vec_f64().unwrap()
    );
}

#[test]
fn state_round_trips_through_save_and_load() {
    check_resume(
        &|params| Box::new(Sgd::new(params, SgdConfig::new(0.1).momentum(0.9)).unwrap()),
        &["p.momentum_buffer"],
    );
    check_resume(
        &|params| Box::new(Adam::new(params, AdamConfig::new(0.1)).unwrap()),
        &["p.exp_avg", "p.exp_avg_sq", "p.step"],
    );
    let amsgrad = AdamWConfig {
        amsgrad: true,
        ..AdamWConfig::new(0.1)
    };
    check_resume(
        &|params| Box::new(AdamW::new(params, amsgrad).unwrap()),
        &["p.exp_avg", "p.exp_avg_sq", "p.max_exp_avg_sq", "p.step"],
    );
}

#[test]
fn adam_step_count_is_exported_as_an_integer() {
    let problem = Problem::new(DType::F32);
    let mut opt = Adam::new(problem.params(), AdamConfig::default()).unwrap();
    problem.run(&mut opt);
    let state = opt.state();
    let step = &state.iter().find(|(k, _)| k == "p.step").unwrap().1;
    assert_eq!(step.to_vec::<i64>().unwrap(), vec![STEPS as i64]);
    let exp_avg = &state.iter().find(|(k, _)| k == "p.exp_avg").unwrap().1;
    assert_eq!(exp_avg.dims(), &[1, 5]);
    assert_eq!(exp_avg.dtype(), DType::F32);
}

#[test]
fn load_state_rejects_mismatches_and_leaves_the_optimizer_unchanged() {
    let problem = Problem::new(DType::F64);
    let mut opt = Adam::new(problem.params(), AdamConfig::new(0.1)).unwrap();
    problem.run(&mut opt);
    let good = opt.state();
    let zeros = |dims: &[usize]| Tensor::<B>::zeros(dims, DType::F64, &dev()).unwrap();

    let mut unknown = good.clone();
    unknown.push(("q.exp_avg".into(), zeros(&[1, 5])));
    assert!(opt.load_state(&unknown).is_err());

    let wrong_shape: Vec<_> = good
        .iter()
        .map(|(k, t)| {
            let t = if k == "p.exp_avg" {
                zeros(&[5])
            } else {
                t.clone()
            };
            (k.clone(), t)
        })
        .collect();
    assert!(opt.load_state(&wrong_shape).is_err());

    let missing: Vec<_> = good
        .iter()
        .filter(|(k, _)| k != "p.exp_avg_sq")
        .cloned()
        .collect();
    assert!(opt.load_state(&missing).is_err());

    let mut duplicate = good.clone();
    duplicate.push(good[0].clone());
    assert!(opt.load_state(&duplicate).is_err());

    let keys = |s: &[(String, Tensor<B>)]| s.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(
        keys(&opt.state()),
        keys(&good),
        "failed loads change nothing"
    );
    // An empty state resets the optimizer.
    opt.load_state(&[]).unwrap();
    assert!(opt.state().is_empty());
}

#[test]
fn constructors_validate_hyper_parameters() {
    let problem = Problem::new(DType::F64);
    assert!(Sgd::new(problem.params(), SgdConfig::new(-0.1)).is_err());
    assert!(Sgd::new(problem.params(), SgdConfig::new(0.1).nesterov(true)).is_err());
    let damped_nesterov = SgdConfig::new(0.1)
        .momentum(0.9)
        .dampening(0.1)
        .nesterov(true);
    assert!(Sgd::new(problem.params(), damped_nesterov).is_err());
    let bad_beta = AdamConfig {
        betas: (1.0, 0.999),
        ..AdamConfig::default()
    };
    assert!(Adam::new(problem.params(), bad_beta).is_err());
    assert!(AdamW::new(problem.params(), AdamWConfig::new(f64::NAN)).is_err());
    let mut duplicated = problem.params();
    duplicated.push(duplicated[0].clone());
    assert!(Adam::new(duplicated, AdamConfig::default()).is_err());
}
