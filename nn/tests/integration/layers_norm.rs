//! BatchNorm1d/2d (training and evaluation, running statistics) and LayerNorm against naive
//! f64 formulas.

use tessera_autograd::Var;
use tessera_core::{DType, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{BatchNormConfig, LayerNormConfig};
use tessera_nn::{Forward, Module};

fn dev() -> Cpu {
    Cpu::new()
}

fn randn(dims: &[usize], seed: u64) -> Tensor<Cpu> {
    Tensor::randn(dims, DType::F64, seed, &dev()).unwrap()
}

fn vec_of(v: &Var<Cpu>) -> Vec<f64> {
    v.value().to_vec_f64().unwrap()
}

fn assert_close(actual: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len(), "length");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= tol * (1.0 + e.abs()),
            "element {i}: got {a}, expected {e}"
        );
    }
}

/// Per-channel `(mean, biased var, unbiased var)` of `x: [n, c, inner]` (row-major).
fn channel_stats(x: &[f64], n: usize, c: usize, inner: usize) -> Vec<(f64, f64, f64)> {
    (0..c)
        .map(|ch| {
            let vals: Vec<f64> = (0..n)
                .flat_map(|b| (0..inner).map(move |i| (b * c + ch) * inner + i))
                .map(|i| x[i])
                .collect();
            let m = vals.len() as f64;
            let mean = vals.iter().sum::<f64>() / m;
            let ss = vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>();
            (mean, ss / m, ss / (m - 1.0))
        })
        .collect()
}

/// `(x - mean) / sqrt(var + eps) * w + b` per channel of `x: [n, c, inner]`.
fn normalise(
    x: &[f64],
    c: usize,
    inner: usize,
    stats: &[(f64, f64)],
    w: &[f64],
    b: &[f64],
) -> Vec<f64> {
    x.iter()
        .enumerate()
        .map(|(i, v)| {
            let ch = (i / inner) % c;
            let (mean, var) = stats[ch];
            (v - mean) / (var + 1e-5).sqrt() * w[ch] + b[ch]
        })
        .collect()
}

#[test]
fn batch_norm_2d_training_uses_batch_statistics_and_updates_running_stats() {
    let (n, c, h, w) = (4, 3, 5, 2);
    let bn = BatchNormConfig::new(c)
        .dtype(DType::F64)
        .init_2d(&dev())
        .unwrap();
    let weight = vec![0.5, -1.0, 2.0];
    let bias = vec![0.1, 0.2, -0.3];
    bn.weight()
        .unwrap()
        .set_value(Tensor::from_vec(weight.clone(), [c], &dev()).unwrap())
        .unwrap();
    bn.bias()
        .unwrap()
        .set_value(Tensor::from_vec(bias.clone(), [c], &dev()).unwrap())
        .unwrap();
    let mut running_mean = vec![0.0; c];
    let mut running_var = vec![1.0; c];
    for step in 0..2 {
        // Shift and scale so the statistics are far from the initial running values.
        let x = randn(&[n, c, h, w], 40 + step)
            .mul_scalar(3.0)
            .unwrap()
            .add_scalar(1.5)
            .unwrap();
        let xv = x.to_vec_f64().unwrap();
        let y = bn.forward(&Var::constant(x)).unwrap();
        let stats = channel_stats(&xv, n, c, h * w);
        let biased: Vec<(f64, f64)> = stats.iter().map(|s| (s.0, s.1)).collect();
        assert_close(
            &vec_of(&y),
            &normalise(&xv, c, h * w, &biased, &weight, &bias),
            1e-10,
        );
        for ch in 0..c {
            running_mean[ch] = 0.9 * running_mean[ch] + 0.1 * stats[ch].0;
            running_var[ch] = 0.9 * running_var[ch] + 0.1 * stats[ch].2;
        }
        assert_close(&vec_of(bn.running_mean()), &running_mean, 1e-12);
        assert_close(&vec_of(bn.running_var()), &running_var, 1e-12);
        assert_eq!(
            bn.num_batches_tracked().value().to_vec::<i64>().unwrap(),
            vec![step as i64 + 1]
        );
    }

    // Evaluation: normalise with the running statistics, leave them unchanged.
    bn.eval();
    assert!(!bn.is_training());
    let x = randn(&[2, c, h, w], 99);
    let xv = x.to_vec_f64().unwrap();
    let y = bn.forward(&Var::constant(x)).unwrap();
    let running: Vec<(f64, f64)> = running_mean
        .iter()
        .copied()
        .zip(running_var.clone())
        .collect();
    assert_close(
        &vec_of(&y),
        &normalise(&xv, c, h * w, &running, &weight, &bias),
        1e-10,
    );
    assert_close(&vec_of(bn.running_mean()), &running_mean, 1e-12);
    assert_eq!(
        bn.num_batches_tracked().value().to_vec::<i64>().unwrap(),
        vec![2]
    );
}

#[test]
fn batch_norm_1d_handles_2d_and_3d_inputs() {
    let c = 3;
    let bn = BatchNormConfig::new(c)
        .dtype(DType::F64)
        .init_1d(&dev())
        .unwrap();
    let ones = vec![1.0; c];
    let zeros = vec![0.0; c];
    // [n, c]
    let x = randn(&[6, c], 5);
    let xv = x.to_vec_f64().unwrap();
    let y = bn.forward(&Var::constant(x)).unwrap();
    let stats: Vec<(f64, f64)> = channel_stats(&xv, 6, c, 1)
        .iter()
        .map(|s| (s.0, s.1))
        .collect();
    assert_close(
        &vec_of(&y),
        &normalise(&xv, c, 1, &stats, &ones, &zeros),
        1e-10,
    );
    // [n, c, l]
    let x = randn(&[2, c, 4], 6);
    let xv = x.to_vec_f64().unwrap();
    let y = bn.forward(&Var::constant(x)).unwrap();
    let stats: Vec<(f64, f64)> = channel_stats(&xv, 2, c, 4)
        .iter()
        .map(|s| (s.0, s.1))
        .collect();
    assert_close(
        &vec_of(&y),
        &normalise(&xv, c, 4, &stats, &ones, &zeros),
        1e-10,
    );
    // Wrong channel count, wrong rank, one value per channel in training.
    assert!(bn.forward(&Var::constant(randn(&[6, 4], 1))).is_err());
    assert!(bn.forward(&Var::constant(randn(&[2, c, 2, 2], 1))).is_err());
    assert!(bn.forward(&Var::constant(randn(&[1, c], 1))).is_err());
    bn.eval();
    assert!(bn.forward(&Var::constant(randn(&[1, c], 1))).is_ok());
}

#[test]
fn batch_norm_without_momentum_keeps_a_cumulative_average() {
    let bn = BatchNormConfig::new(2)
        .momentum(None)
        .affine(false)
        .dtype(DType::F64)
        .init_1d(&dev())
        .unwrap();
    assert!(bn.parameters().is_empty());
    let batches = [randn(&[5, 2], 1), randn(&[5, 2], 2), randn(&[5, 2], 3)];
    let mut means = Vec::new();
    for x in &batches {
        means.push(channel_stats(&x.to_vec_f64().unwrap(), 5, 2, 1));
        bn.forward(&Var::constant(x.clone())).unwrap();
    }
    // With momentum 1/k at batch k, the running mean is the plain average of the batch means.
    for ch in 0..2 {
        let avg = means.iter().map(|s| s[ch].0).sum::<f64>() / 3.0;
        assert!((vec_of(bn.running_mean())[ch] - avg).abs() < 1e-12);
    }
}

#[test]
fn batch_norm_names_parameters_and_buffers_like_pytorch() {
    let bn = BatchNormConfig::new(4).init_2d(&dev()).unwrap();
    let params: Vec<String> = bn.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(params, vec!["weight", "bias"]);
    let buffers: Vec<String> = bn.buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        buffers,
        vec!["running_mean", "running_var", "num_batches_tracked"]
    );
    assert_eq!(vec_of(bn.running_var()), vec![1.0; 4]);
    assert!(BatchNormConfig::new(4)
        .dtype(DType::I64)
        .init_2d(&dev())
        .is_err());
    assert!(BatchNormConfig::new(4).eps(0.0).init_2d(&dev()).is_err());
}

#[test]
fn batch_norm_training_gradient_matches_the_closed_form() {
    // For y = BN(x) with unit affine, d sum(y * r) / dx = (r - mean(r) - x̂ mean(r x̂)) / σ.
    let (n, c) = (5, 2);
    let bn = BatchNormConfig::new(c)
        .dtype(DType::F64)
        .init_1d(&dev())
        .unwrap();
    let x = Var::param(randn(&[n, c], 8));
    let r = randn(&[n, c], 9);
    let loss = bn
        .forward(&x)
        .unwrap()
        .mul(&Var::constant(r.clone()))
        .unwrap()
        .sum_all()
        .unwrap();
    loss.backward().unwrap();
    let (xv, rv) = (x.value().to_vec_f64().unwrap(), r.to_vec_f64().unwrap());
    let gx = x.grad().unwrap().to_vec_f64().unwrap();
    for ch in 0..c {
        let col = |v: &[f64]| (0..n).map(|b| v[b * c + ch]).collect::<Vec<f64>>();
        let (xc, rc) = (col(&xv), col(&rv));
        let mean = xc.iter().sum::<f64>() / n as f64;
        let var = xc.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        let sigma = (var + 1e-5).sqrt();
        let xhat: Vec<f64> = xc.iter().map(|v| (v - mean) / sigma).collect();
        let r_mean = rc.iter().sum::<f64>() / n as f64;
        let rx_mean = rc.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / n as f64;
        for b in 0..n {
            let expected = (rc[b] - r_mean - xhat[b] * rx_mean) / sigma;
            assert!((gx[b * c + ch] - expected).abs() < 1e-9);
        }
    }
}

#[test]
fn layer_norm_normalises_the_trailing_dimensions() {
    let ln = LayerNormConfig::new(vec![3, 4])
        .dtype(DType::F64)
        .init(&dev())
        .unwrap();
    let w = randn(&[3, 4], 1);
    let b = randn(&[3, 4], 2);
    ln.weight().unwrap().set_value(w.clone()).unwrap();
    ln.bias().unwrap().set_value(b.clone()).unwrap();
    let (wv, bv) = (w.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
    let x = randn(&[2, 5, 3, 4], 3);
    let xv = x.to_vec_f64().unwrap();
    let y = ln.forward(&Var::constant(x)).unwrap();
    let mut expected = Vec::new();
    for group in xv.chunks(12) {
        let mean = group.iter().sum::<f64>() / 12.0;
        let var = group.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 12.0;
        for (i, v) in group.iter().enumerate() {
            expected.push((v - mean) / (var + 1e-5).sqrt() * wv[i] + bv[i]);
        }
    }
    assert_close(&vec_of(&y), &expected, 1e-10);
    // Same in evaluation mode; wrong trailing shape is an error.
    ln.eval();
    let x = randn(&[2, 3, 4], 4);
    assert!(ln.forward(&Var::constant(x)).is_ok());
    assert!(ln.forward(&Var::constant(randn(&[2, 4, 3], 4))).is_err());
    let names: Vec<String> = ln.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["weight", "bias"]);
}

#[test]
fn layer_norm_without_affine_has_zero_mean_unit_variance_rows() {
    let ln = LayerNormConfig::new(vec![8])
        .elementwise_affine(false)
        .dtype(DType::F64)
        .init(&dev())
        .unwrap();
    assert!(ln.parameters().is_empty());
    let x = randn(&[3, 8], 5)
        .mul_scalar(10.0)
        .unwrap()
        .add_scalar(4.0)
        .unwrap();
    let y = vec_of(&ln.forward(&Var::constant(x)).unwrap());
    for row in y.chunks(8) {
        let mean = row.iter().sum::<f64>() / 8.0;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 8.0;
        assert!(mean.abs() < 1e-12);
        assert!((var - 1.0).abs() < 1e-5);
    }
    assert!(LayerNormConfig::new(vec![]).init(&dev()).is_err());
    assert!(LayerNormConfig::new(vec![4])
        .eps(-1.0)
        .init(&dev())
        .is_err());
}
