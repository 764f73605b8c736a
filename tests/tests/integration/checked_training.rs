//! `Checked<B, Cpu>` while training: a small CNN (conv, relu, max pooling, matmul,
//! log-softmax, gather, mean) trained by SGD through autograd. The checked run must agree with
//! the plain run step for step, for the CPU and for the example backend.

use tessera_autograd::{no_grad, Var};
use tessera_backend_example::ExampleBackend;
use tessera_checked::Checked;
use tessera_core::{Backend, Conv2dParams, DType, Pool2dParams, Result, Tensor};
use tessera_cpu::Cpu;

/// The loss after each of ten SGD steps on a fixed random batch.
fn train<B: Backend>(dev: &B) -> Result<Vec<f32>> {
    let x = Var::constant(Tensor::randn([4, 1, 6, 6], DType::F32, 1, dev)?);
    let labels = Tensor::from_vec(vec![0i64, 2, 1, 2], [4, 1], dev)?;
    let scaled = |dims: Vec<usize>, seed: u64, scale: f64| -> Result<Var<B>> {
        Ok(Var::param(
            Tensor::randn(dims, DType::F32, seed, dev)?.mul_scalar(scale)?,
        ))
    };
    let conv_w = scaled(vec![2, 1, 3, 3], 2, 0.5)?;
    let conv_b = scaled(vec![2], 3, 0.1)?;
    let dense = scaled(vec![8, 3], 4, 0.5)?;
    let params = [&conv_w, &conv_b, &dense];
    let mut losses = Vec::new();
    for _ in 0..10 {
        let h = x
            .conv2d(&conv_w, Some(&conv_b), Conv2dParams::default())?
            .relu()?
            .max_pool2d(Pool2dParams::square(2))?
            .flatten(1, -1)?;
        let log_p = h.matmul(&dense)?.log_softmax(-1)?;
        let loss = log_p.gather(1, &labels)?.mean_all()?.neg()?;
        loss.backward()?;
        losses.push(loss.value().to_scalar::<f32>()?);
        no_grad(|| -> Result<()> {
            for p in params {
                let step = p.grad().expect("a gradient").mul_scalar(0.5)?;
                p.set_value(p.value().sub(&step)?)?;
                p.zero_grad();
            }
            Ok(())
        })?;
    }
    Ok(losses)
}

#[test]
fn checked_cpu_trains_exactly_like_the_cpu() {
    let plain = train(&Cpu::new()).expect("plain training");
    let checked = train(&Checked::new(Cpu::new(), Cpu::new())).expect("no divergence");
    assert_eq!(plain, checked);
    assert!(plain[9] < plain[0], "the loss must go down: {plain:?}");
}

#[test]
fn the_example_backend_trains_without_diverging_from_the_cpu() {
    let checked = train(&Checked::new(ExampleBackend::new(), Cpu::new())).expect("no divergence");
    let plain = train(&ExampleBackend::new()).expect("plain training");
    assert_eq!(plain, checked);
    let cpu = train(&Cpu::new()).expect("cpu training");
    for (e, c) in plain.iter().zip(&cpu) {
        assert!(
            (e - c).abs() <= 1e-4 * c.abs().max(1.0),
            "{plain:?} vs {cpu:?}"
        );
    }
}
