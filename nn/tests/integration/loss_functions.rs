//! Losses against naive f64 formulas, including extreme logits, label smoothing and gradients.

use tessera_autograd::Var;
use tessera_core::{DType, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::loss::{
    bce_with_logits, cross_entropy, cross_entropy_with_label_smoothing, mse_loss, nll_loss,
};

type B = Cpu;

fn dev() -> B {
    Cpu::new()
}

fn var(values: &[f64], dims: &[usize]) -> Var<B> {
    Var::param(Tensor::from_vec(values.to_vec(), dims, &dev()).unwrap())
}

fn targets(values: &[i64]) -> Tensor<B> {
    Tensor::from_vec(values.to_vec(), [values.len()], &dev()).unwrap()
}

fn scalar(v: &Var<B>) -> f64 {
    assert_eq!(v.rank(), 0, "losses are scalars");
    v.value().to_scalar_f64().unwrap()
}

/// Naive log-softmax of one row, shifted by its maximum.
fn log_softmax_row(row: &[f64]) -> Vec<f64> {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = m + row.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
    row.iter().map(|x| x - lse).collect()
}

/// Naive smoothed cross-entropy: mean over rows of `(1-ε)(-logp[t]) + ε·mean_c(-logp[c])`.
fn naive_cross_entropy(logits: &[f64], c: usize, t: &[i64], eps: f64) -> f64 {
    let rows: Vec<f64> = logits
        .chunks(c)
        .zip(t)
        .map(|(row, &ti)| {
            let lp = log_softmax_row(row);
            let uniform = -lp.iter().sum::<f64>() / c as f64;
            (1.0 - eps) * -lp[ti as usize] + eps * uniform
        })
        .collect();
    rows.iter().sum::<f64>() / rows.len() as f64
}

const LOGITS: [f64; 12] = [
    0.5, -1.2, 3.0, 0.1, //
    -0.3, 0.0, 0.7, 2.2, //
    1.5, 1.5, -2.0, 0.3,
];

#[test]
fn mse_is_the_mean_squared_difference_with_the_right_gradient() {
    let p = [1.0, -2.0, 0.5, 4.0, 0.0, 3.0];
    let t = [0.5, -1.0, 0.5, 1.0, 2.0, 3.5];
    let (pred, target) = (var(&p, &[2, 3]), var(&t, &[2, 3]));
    let loss = mse_loss(&pred, &target).unwrap();
    let expected = p.iter().zip(&t).map(|(a, b)| (a - b).powi(2)).sum::<f64>() / 6.0;
    assert!((scalar(&loss) - expected).abs() < 1e-15);
    loss.backward().unwrap();
    let g = pred.grad().unwrap().to_vec_f64().unwrap();
    for ((gi, a), b) in g.iter().zip(&p).zip(&t) {
        assert!((gi - 2.0 * (a - b) / 6.0).abs() < 1e-15);
    }
    assert!(mse_loss(&var(&p, &[6]), &target).is_err());
}

#[test]
fn cross_entropy_matches_naive_log_softmax() {
    let t = [2, 3, 0];
    let logits = var(&LOGITS, &[3, 4]);
    let loss = cross_entropy(&logits, &targets(&t)).unwrap();
    let expected = naive_cross_entropy(&LOGITS, 4, &t, 0.0);
    assert!((scalar(&loss) - expected).abs() < 1e-14);
    // d loss / d logits = (softmax - one_hot) / n.
    loss.backward().unwrap();
    let g = logits.grad().unwrap().to_vec_f64().unwrap();
    for (r, row) in LOGITS.chunks(4).enumerate() {
        let p: Vec<f64> = log_softmax_row(row).iter().map(|v| v.exp()).collect();
        for k in 0..4 {
            let one_hot = if k as i64 == t[r] { 1.0 } else { 0.0 };
            assert!((g[r * 4 + k] - (p[k] - one_hot) / 3.0).abs() < 1e-14);
        }
    }
}

#[test]
fn cross_entropy_with_label_smoothing_matches_pytorch_formula() {
    let t = [1, 1, 3];
    for eps in [0.1, 0.25, 1.0] {
        let loss =
            cross_entropy_with_label_smoothing(&var(&LOGITS, &[3, 4]), &targets(&t), eps).unwrap();
        let expected = naive_cross_entropy(&LOGITS, 4, &t, eps);
        assert!((scalar(&loss) - expected).abs() < 1e-14, "eps {eps}");
    }
    let logits = var(&LOGITS, &[3, 4]);
    assert!(cross_entropy_with_label_smoothing(&logits, &targets(&t), 1.5).is_err());
    assert!(cross_entropy_with_label_smoothing(&logits, &targets(&t), -0.1).is_err());
}

#[test]
fn cross_entropy_is_finite_for_extreme_logits() {
    let x = [1000.0, -1000.0, 0.0, -1000.0, 1000.0, 1000.0];
    for dtype in [DType::F32, DType::F64] {
        let logits = Var::param(
            Tensor::from_vec(x.to_vec(), [2, 3], &dev())
                .unwrap()
                .to_dtype(dtype)
                .unwrap(),
        );
        // Row 0 predicts class 0 with certainty; row 1 splits between classes 1 and 2.
        let loss = cross_entropy(&logits, &targets(&[0, 1])).unwrap();
        let expected = (0.0 + 2f64.ln()) / 2.0;
        // f32 resolves 1000 + ln 2 to about 6e-5.
        assert!((scalar(&loss) - expected).abs() < 1e-4, "{dtype}");
        let wrong = cross_entropy(&logits, &targets(&[1, 0])).unwrap();
        assert!((scalar(&wrong) - (2000.0 + 2000.0 + 2f64.ln()) / 2.0).abs() < 1e-3);
        let smoothed = cross_entropy_with_label_smoothing(&logits, &targets(&[0, 1]), 0.1).unwrap();
        assert!(scalar(&smoothed).is_finite());
        smoothed.backward().unwrap();
        let g = logits.grad().unwrap().to_vec_f64().unwrap();
        assert!(g.iter().all(|v| v.is_finite()), "{g:?}");
    }
}

#[test]
fn nll_loss_picks_the_target_log_probabilities() {
    let lp = [-0.1, -2.0, -3.0, -1.0, -0.5, -4.0];
    let loss = nll_loss(&var(&lp, &[2, 3]), &targets(&[0, 2])).unwrap();
    assert!((scalar(&loss) - (0.1 + 4.0) / 2.0).abs() < 1e-15);
}

#[test]
fn class_losses_reject_bad_targets() {
    let logits = var(&LOGITS, &[3, 4]);
    assert!(
        cross_entropy(&logits, &targets(&[0, 1])).is_err(),
        "wrong length"
    );
    assert!(
        cross_entropy(&logits, &targets(&[0, 1, 4])).is_err(),
        "class 4 of 4"
    );
    assert!(
        cross_entropy(&logits, &targets(&[0, -1, 2])).is_err(),
        "negative class"
    );
    let float_targets = Tensor::from_vec(vec![0.0f64, 1.0, 2.0], [3], &dev()).unwrap();
    assert!(cross_entropy(&logits, &float_targets).is_err());
    assert!(nll_loss(&var(&LOGITS, &[12]), &targets(&[0])).is_err());
}

/// Naive stable binary cross-entropy on logits.
fn naive_bce(x: &[f64], y: &[f64]) -> f64 {
    x.iter()
        .zip(y)
        .map(|(&x, &y)| x.max(0.0) - x * y + (-x.abs()).exp().ln_1p())
        .sum::<f64>()
        / x.len() as f64
}

#[test]
fn bce_with_logits_matches_the_stable_formula_and_the_textbook_one() {
    let x = [0.3, -1.5, 2.0, 0.0, -0.2, 4.0];
    let y = [1.0, 0.0, 1.0, 0.5, 0.0, 0.0];
    let logits = var(&x, &[2, 3]);
    let loss = bce_with_logits(&logits, &var(&y, &[2, 3])).unwrap();
    assert!((scalar(&loss) - naive_bce(&x, &y)).abs() < 1e-15);
    // Textbook form: -mean(y log σ(x) + (1 - y) log(1 - σ(x))).
    let textbook = x
        .iter()
        .zip(&y)
        .map(|(&x, &y)| {
            let s = 1.0 / (1.0 + (-x).exp());
            -(y * s.ln() + (1.0 - y) * (1.0 - s).ln())
        })
        .sum::<f64>()
        / 6.0;
    assert!((scalar(&loss) - textbook).abs() < 1e-12);
    // d loss / d x = (σ(x) - y) / n, also at x = 0 (element 3); d loss / d y = -x / n.
    let target_var = var(&y, &[2, 3]);
    let loss = bce_with_logits(&logits, &target_var).unwrap();
    loss.backward().unwrap();
    let gy = target_var.grad().unwrap().to_vec_f64().unwrap();
    for i in 0..6 {
        assert!((gy[i] + x[i] / 6.0).abs() < 1e-15);
    }
    let g = logits.grad().unwrap().to_vec_f64().unwrap();
    for i in 0..6 {
        let s = 1.0 / (1.0 + (-x[i]).exp());
        assert!((g[i] - (s - y[i]) / 6.0).abs() < 1e-15, "element {i}");
    }
}

#[test]
fn bce_with_logits_is_finite_for_extreme_logits() {
    let x = [1000.0, -1000.0, 1000.0, -1000.0];
    let y = [1.0, 0.0, 0.0, 1.0];
    for dtype in [DType::F32, DType::F64] {
        let cast = |v: &[f64]| {
            Var::param(
                Tensor::from_vec(v.to_vec(), [4], &dev())
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap(),
            )
        };
        let logits = cast(&x);
        let loss = bce_with_logits(&logits, &cast(&y)).unwrap();
        assert!((scalar(&loss) - 500.0).abs() < 1e-3, "{dtype}");
        loss.backward().unwrap();
        assert!(logits
            .grad()
            .unwrap()
            .to_vec_f64()
            .unwrap()
            .iter()
            .all(|v| v.is_finite()));
    }
    assert!(bce_with_logits(&var(&x, &[4]), &var(&y, &[2, 2])).is_err());
    let f32_targets = Var::constant(Tensor::from_vec(vec![1.0f32; 4], [4], &dev()).unwrap());
    assert!(bce_with_logits(&var(&x, &[4]), &f32_targets).is_err());
}
