//! Mixed precision: a Linear under a 16-bit policy computes in 16 bits with f32 master
//! weights, and the dynamic loss scaler scales, unscales, skips and grows as documented.

use tessera_autograd::Var;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::LinearConfig;
use tessera_nn::precision::{DynamicLossScaler, Precision, ScalerStep};
use tessera_nn::Forward;

type T = Tensor<Cpu>;

fn t(values: &[f64], dims: &[usize]) -> T {
    Tensor::from_vec(values.to_vec(), dims, &Cpu::new())
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap()
}

/// `x` rounded to bfloat16 (8 significant bits, to nearest even) by f64 math.
fn round_bf16(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let e = x.abs().log2().floor() as i32;
    let q = 2f64.powi(e - 7);
    (x / q).round_ties_even() * q
}

#[test]
fn a_bf16_linear_computes_in_bf16_and_keeps_f32_parameters_and_gradients() {
    let dev = Cpu::new();
    let config = LinearConfig::new(5, 3).precision(Precision::BF16);
    let fc = config.init(&dev, &mut Generator::new(4)).unwrap();
    assert_eq!(fc.precision(), Precision::BF16);
    assert_eq!(fc.weight().dtype(), DType::F32);
    let xs: Vec<f64> = (0..10).map(|i| (i as f64 * 0.37).sin()).collect();
    let x = Var::constant(t(&xs, &[2, 5]));
    let y = fc.forward(&x).unwrap();
    assert_eq!(y.dtype(), DType::F32);
    let got = y.value().to_vec_f64().unwrap();

    // Reference in f64 from the bf16-rounded operands; every output is a bf16 value (it was
    // rounded to bf16 before the cast back), and within two bf16 roundings of the reference.
    let w = fc.weight().value().to_vec_f64().unwrap();
    let b = fc.bias().unwrap().value().to_vec_f64().unwrap();
    for r in 0..2 {
        for o in 0..3 {
            let terms: Vec<f64> = (0..5)
                .map(|i| round_bf16(xs[r * 5 + i] as f32 as f64) * round_bf16(w[o * 5 + i]))
                .collect();
            let exact = terms.iter().sum::<f64>() + round_bf16(b[o]);
            let magnitude = terms.iter().map(|v| v.abs()).sum::<f64>() + b[o].abs();
            let g = got[r * 3 + o];
            assert_eq!(round_bf16(g), g, "output {g} is not a bf16 value");
            assert!(
                (g - exact).abs() <= 2.0 * 2f64.powi(-8) * magnitude,
                "{g} vs {exact}"
            );
        }
    }

    // The gradient reaches the f32 master weight in f32: d sum(y) / dW[o, i] is the sum of
    // the (bf16) inputs of column i, computed in bf16.
    y.sum_all().unwrap().backward().unwrap();
    let grad = fc.weight().grad().unwrap();
    assert_eq!(grad.dtype(), DType::F32);
    let grad = grad.to_vec_f64().unwrap();
    for o in 0..3 {
        for i in 0..5 {
            let (a, c) = (
                round_bf16(xs[i] as f32 as f64),
                round_bf16(xs[5 + i] as f32 as f64),
            );
            let g = grad[o * 5 + i];
            assert!(
                (g - (a + c)).abs() <= 2f64.powi(-8) * (a.abs() + c.abs()),
                "{g}"
            );
            assert_eq!(round_bf16(g), g);
        }
    }
    // The default policy computes in f32: its outputs are (almost all) not bf16 values.
    let fc32 = LinearConfig::new(5, 3)
        .init(&dev, &mut Generator::new(4))
        .unwrap();
    let y32 = fc32.forward(&x).unwrap().value().to_vec_f64().unwrap();
    assert!(y32.iter().any(|&v| round_bf16(v) != v));
}

#[test]
fn the_loss_scaler_unscales_exactly_and_grows_after_the_interval() {
    let p = Var::param(t(&[1.0, 2.0], &[2]));
    let mut scaler = DynamicLossScaler::new().init_scale(8.0).growth_interval(2);
    let loss = p.mul_scalar(3.0).unwrap().sum_all().unwrap();
    let scaled = scaler.scale_loss(&loss).unwrap();
    assert_eq!(scaled.value().to_vec_f64().unwrap(), vec![72.0]);
    scaled.backward().unwrap();
    assert_eq!(p.grad().unwrap().to_vec_f64().unwrap(), vec![24.0, 24.0]);
    let step = scaler.unscale_and_update(std::slice::from_ref(&p)).unwrap();
    assert_eq!(step, ScalerStep::Apply);
    assert_eq!(p.grad().unwrap().to_vec_f64().unwrap(), vec![3.0, 3.0]);
    assert_eq!(scaler.scale(), 8.0, "one finite step of an interval of two");
    scaler.update(false);
    assert_eq!(scaler.scale(), 16.0);
    // A parameter without a gradient is left alone.
    let q = Var::param(t(&[1.0], &[1]));
    assert!(!scaler.unscale(std::slice::from_ref(&q)).unwrap());
    assert!(q.grad().is_none());
}

#[test]
fn the_loss_scaler_skips_steps_with_inf_or_nan_and_backs_off() {
    for bad in [f64::INFINITY, f64::NAN] {
        let p = Var::param(t(&[1.0, 2.0], &[2]));
        p.set_grad(Some(t(&[1.0, bad], &[2])));
        let mut scaler = DynamicLossScaler::new()
            .init_scale(1024.0)
            .growth_interval(1);
        let step = scaler.unscale_and_update(std::slice::from_ref(&p)).unwrap();
        assert_eq!(step, ScalerStep::Skip);
        assert!(
            p.grad().is_none(),
            "the gradients of a skipped step are cleared"
        );
        assert_eq!(scaler.scale(), 512.0);
        // The count of finite steps restarts after an overflow.
        scaler.update(false);
        assert_eq!(scaler.scale(), 1024.0);
    }
    let bad = DynamicLossScaler::new().init_scale(0.0);
    assert!(bad.unscale::<Cpu>(&[]).is_err());
}

#[test]
fn loss_scaling_keeps_small_f16_gradients_from_flushing_to_zero() {
    let dev = Cpu::new();
    let grad_of_weight = |scaler: Option<&mut DynamicLossScaler>| -> Vec<f64> {
        let fc = LinearConfig::new(4, 1)
            .bias(false)
            .precision(Precision::F16)
            .init(&dev, &mut Generator::new(9))
            .unwrap();
        let x = Var::constant(t(&[0.5, -0.25, 1.0, 0.75], &[1, 4]));
        // A tiny loss: its gradient (1e-8 x) is below f16's smallest subnormal (6e-8).
        let loss = fc
            .forward(&x)
            .unwrap()
            .sum_all()
            .unwrap()
            .mul_scalar(1e-8)
            .unwrap();
        match scaler {
            Some(s) => {
                s.scale_loss(&loss).unwrap().backward().unwrap();
                let params = [fc.weight().clone()];
                assert_eq!(s.unscale_and_update(&params).unwrap(), ScalerStep::Apply);
            }
            None => loss.backward().unwrap(),
        }
        fc.weight().grad().unwrap().to_vec_f64().unwrap()
    };
    assert!(
        grad_of_weight(None).iter().all(|&g| g == 0.0),
        "f16 flushes without scaling"
    );
    let mut scaler = DynamicLossScaler::new();
    let scaled = grad_of_weight(Some(&mut scaler));
    for (g, x) in scaled.iter().zip([0.5, -0.25, 1.0, 0.75]) {
        let want = 1e-8 * x;
        assert!(
            (g - want).abs() <= 2f64.powi(-10) * want.abs(),
            "{g} vs {want}"
        );
    }
}

/// One rank of a two-rank run whose other rank's flags are `other` (max-reduced with ours).
struct TwoRanks {
    other: f64,
}

impl tessera_nn::distributed::Communicator<Cpu> for TwoRanks {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        2
    }
    fn library(&self) -> &'static str {
        "test"
    }
    fn all_reduce(
        &self,
        _tensor: &mut T,
        _op: tessera_nn::distributed::Reduction,
    ) -> tessera_core::Result<()> {
        unreachable!("the scaler agrees through all_reduce_host")
    }
    fn broadcast(&self, _tensor: &mut T, _root: usize) -> tessera_core::Result<()> {
        unreachable!()
    }
    fn barrier(&self) -> tessera_core::Result<()> {
        Ok(())
    }
    fn all_reduce_host(
        &self,
        values: &mut [f64],
        op: tessera_nn::distributed::Reduction,
    ) -> tessera_core::Result<()> {
        assert_eq!(op, tessera_nn::distributed::Reduction::Max);
        for v in values {
            *v = v.max(self.other);
        }
        Ok(())
    }
}

#[test]
fn ranks_skip_together_when_any_rank_overflowed() {
    for (other_overflowed, local_bad, want) in [
        (true, false, ScalerStep::Skip),
        (false, true, ScalerStep::Skip),
        (false, false, ScalerStep::Apply),
    ] {
        let p = Var::param(t(&[1.0, 2.0], &[2]));
        let g1 = if local_bad { f64::INFINITY } else { 4.0 };
        p.set_grad(Some(t(&[8.0, g1], &[2])));
        let comm = TwoRanks {
            other: if other_overflowed { 1.0 } else { 0.0 },
        };
        let mut scaler = DynamicLossScaler::new().init_scale(4.0);
        let step = scaler
            .unscale_and_update_across(std::slice::from_ref(&p), &comm)
            .unwrap();
        assert_eq!(step, want, "other {other_overflowed}, local {local_bad}");
        if want == ScalerStep::Apply {
            assert_eq!(p.grad().unwrap().to_vec_f64().unwrap(), [2.0, 1.0]);
            assert_eq!(scaler.scale(), 4.0);
        } else {
            assert!(p.grad().is_none());
            assert_eq!(scaler.scale(), 2.0);
        }
    }
}
