//! Linear and Conv2d: forward passes against naive f64 loops, default initialisation bounds,
//! gradients of the bias, and input validation.

use tessera_autograd::Var;
use tessera_core::{Conv2dParams, DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{Conv2d, Conv2dConfig, Linear, LinearConfig};
use tessera_nn::{Forward, Module};

fn dev() -> Cpu {
    Cpu::new()
}

fn randn(dims: &[usize], seed: u64) -> Tensor<Cpu> {
    Tensor::randn(dims, DType::F64, seed, &dev()).unwrap()
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

#[test]
fn linear_forward_matches_naive_loops_for_any_leading_dims() {
    let (n_in, n_out) = (4, 3);
    let w = randn(&[n_out, n_in], 1);
    let b = randn(&[n_out], 2);
    let layer = Linear::from_tensors(w.clone(), Some(b.clone())).unwrap();
    let (wv, bv) = (w.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
    for dims in [vec![n_in], vec![5, n_in], vec![2, 3, n_in]] {
        let x = randn(&dims, 3);
        let xv = x.to_vec_f64().unwrap();
        let y = layer.forward(&Var::constant(x)).unwrap();
        let mut expected_dims = dims.clone();
        *expected_dims.last_mut().unwrap() = n_out;
        assert_eq!(y.dims(), expected_dims.as_slice());
        let rows = xv.len() / n_in;
        let mut expected = vec![0.0; rows * n_out];
        for r in 0..rows {
            for o in 0..n_out {
                let mut acc = bv[o];
                for i in 0..n_in {
                    acc += xv[r * n_in + i] * wv[o * n_in + i];
                }
                expected[r * n_out + o] = acc;
            }
        }
        assert_close(&y.value().to_vec_f64().unwrap(), &expected, 1e-12);
    }
}

#[test]
fn linear_without_bias_is_a_plain_product_and_names_only_the_weight() {
    let mut g = Generator::new(0);
    let layer = LinearConfig::new(3, 2)
        .bias(false)
        .dtype(DType::F64)
        .init(&dev(), &mut g)
        .unwrap();
    let names: Vec<String> = layer.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["weight"]);
    let x = Tensor::from_vec(vec![1.0f64, 0.0, 0.0], [1, 3], &dev()).unwrap();
    let y = layer.forward(&Var::constant(x)).unwrap().value();
    let w = layer.weight().value().to_vec_f64().unwrap();
    // x picks the first input column of W.
    assert_close(&y.to_vec_f64().unwrap(), &[w[0], w[3]], 1e-15);
}

#[test]
fn linear_default_init_is_uniform_within_one_over_sqrt_fan_in() {
    let mut g = Generator::new(7);
    let (n_in, n_out) = (64, 128);
    let layer = LinearConfig::new(n_in, n_out).init(&dev(), &mut g).unwrap();
    let bound = 1.0 / (n_in as f64).sqrt();
    let w = layer.weight().value().to_vec_f64().unwrap();
    let b = layer.bias().unwrap().value().to_vec_f64().unwrap();
    assert_eq!(layer.weight().dtype(), DType::F32);
    for v in w.iter().chain(&b) {
        assert!(v.abs() <= bound, "{v} outside ±{bound}");
    }
    // U(-b, b): mean 0, variance b²/3, extremes close to the bound.
    let mean = w.iter().sum::<f64>() / w.len() as f64;
    let var = w.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / w.len() as f64;
    assert!(mean.abs() < 0.05 * bound, "mean {mean}");
    assert!(
        (var / (bound * bound / 3.0) - 1.0).abs() < 0.05,
        "var {var}"
    );
    let max = w.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(max > 0.99 * bound);
    // A second layer drawn from the same generator differs; the same seed reproduces.
    let other = LinearConfig::new(n_in, n_out).init(&dev(), &mut g).unwrap();
    assert_ne!(other.weight().value().to_vec_f64().unwrap(), w);
    let again = LinearConfig::new(n_in, n_out)
        .init(&dev(), &mut Generator::new(7))
        .unwrap();
    assert_eq!(again.weight().value().to_vec_f64().unwrap(), w);
}

#[test]
fn linear_gradients_flow_to_weight_and_bias() {
    let w = randn(&[2, 3], 4);
    let layer = Linear::from_tensors(w, Some(randn(&[2], 5))).unwrap();
    let x = randn(&[4, 3], 6);
    let xv = x.to_vec_f64().unwrap();
    layer
        .forward(&Var::constant(x))
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    // d sum(y) / d b = number of rows; d sum(y) / d W[o, i] = Σ_r x[r, i].
    let gb = layer.bias().unwrap().grad().unwrap().to_vec_f64().unwrap();
    assert_close(&gb, &[4.0, 4.0], 1e-12);
    let col_sums: Vec<f64> = (0..3)
        .map(|i| (0..4).map(|r| xv[r * 3 + i]).sum())
        .collect();
    let gw = layer.weight().grad().unwrap().to_vec_f64().unwrap();
    let expected: Vec<f64> = col_sums.iter().chain(&col_sums).copied().collect();
    assert_close(&gw, &expected, 1e-12);
}

#[test]
fn linear_rejects_bad_shapes() {
    let w = randn(&[2, 3], 1);
    let layer = Linear::from_tensors(w.clone(), None).unwrap();
    assert!(layer.forward(&Var::constant(randn(&[4, 5], 2))).is_err());
    assert!(layer.forward(&Var::constant(randn(&[], 2))).is_err());
    assert!(Linear::from_tensors(randn(&[6], 1), None).is_err());
    assert!(Linear::from_tensors(w, Some(randn(&[3], 1))).is_err());
}

/// Naive convolution: `x: [n, c, h, w]`, `w: [o, c, kh, kw]`.
#[allow(clippy::too_many_arguments)]
fn naive_conv2d(
    x: &[f64],
    xd: [usize; 4],
    w: &[f64],
    wd: [usize; 4],
    bias: &[f64],
    p: Conv2dParams,
) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, wid] = xd;
    let [o, _, kh, kw] = wd;
    let oh = (h + 2 * p.padding.0 - p.dilation.0 * (kh - 1) - 1) / p.stride.0 + 1;
    let ow = (wid + 2 * p.padding.1 - p.dilation.1 * (kw - 1) - 1) / p.stride.1 + 1;
    let mut out = vec![0.0; n * o * oh * ow];
    for b in 0..n {
        for oc in 0..o {
            for y in 0..oh {
                for z in 0..ow {
                    let mut acc = bias[oc];
                    for ic in 0..c {
                        for i in 0..kh {
                            for j in 0..kw {
                                let iy = (y * p.stride.0 + i * p.dilation.0) as isize
                                    - p.padding.0 as isize;
                                let ix = (z * p.stride.1 + j * p.dilation.1) as isize
                                    - p.padding.1 as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wid as isize {
                                    continue;
                                }
                                let xi = ((b * c + ic) * h + iy as usize) * wid + ix as usize;
                                let wi = ((oc * c + ic) * kh + i) * kw + j;
                                acc += x[xi] * w[wi];
                            }
                        }
                    }
                    out[((b * o + oc) * oh + y) * ow + z] = acc;
                }
            }
        }
    }
    (out, [n, o, oh, ow])
}

#[test]
fn conv2d_forward_matches_nested_loops() {
    let xd = [2, 3, 7, 6];
    let wd = [4, 3, 3, 2];
    let cases = [
        Conv2dParams::default(),
        Conv2dParams {
            stride: (2, 1),
            padding: (1, 2),
            dilation: (1, 2),
        },
        Conv2dParams {
            stride: (1, 3),
            padding: (2, 0),
            dilation: (2, 1),
        },
    ];
    for (k, params) in cases.into_iter().enumerate() {
        let x = randn(&xd, 10 + k as u64);
        let w = randn(&wd, 20 + k as u64);
        let b = randn(&[4], 30 + k as u64);
        let layer = Conv2d::from_tensors(w.clone(), Some(b.clone()), params).unwrap();
        let y = layer.forward(&Var::constant(x.clone())).unwrap().value();
        let (expected, dims) = naive_conv2d(
            &x.to_vec_f64().unwrap(),
            xd,
            &w.to_vec_f64().unwrap(),
            wd,
            &b.to_vec_f64().unwrap(),
            params,
        );
        assert_eq!(y.dims(), dims.as_slice(), "case {k}");
        assert_close(&y.to_vec_f64().unwrap(), &expected, 1e-12);
    }
}

#[test]
fn conv2d_default_init_uses_fan_in_of_channels_times_kernel() {
    let mut g = Generator::new(3);
    let config = Conv2dConfig::new(8, 16, (3, 5))
        .stride((2, 2))
        .padding((1, 1));
    let layer = config.dtype(DType::F64).init(&dev(), &mut g).unwrap();
    assert_eq!(layer.weight().dims(), &[16, 8, 3, 5]);
    assert_eq!(layer.params().stride, (2, 2));
    let bound = 1.0 / ((8 * 3 * 5) as f64).sqrt();
    let w = layer.weight().value().to_vec_f64().unwrap();
    assert!(w.iter().all(|v| v.abs() <= bound));
    assert!(w.iter().any(|v| v.abs() > 0.95 * bound));
    let b = layer.bias().unwrap().value().to_vec_f64().unwrap();
    assert!(b.iter().all(|v| v.abs() <= bound));
    let names: Vec<String> = layer.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["weight", "bias"]);
    let no_bias = config
        .bias(false)
        .dtype(DType::F64)
        .init(&dev(), &mut g)
        .unwrap();
    assert!(no_bias.bias().is_none());
}

#[test]
fn conv2d_rejects_bad_configurations() {
    let w = randn(&[2, 3, 3, 3], 1);
    let zero_stride = Conv2dParams {
        stride: (0, 1),
        ..Conv2dParams::default()
    };
    assert!(Conv2d::from_tensors(w.clone(), None, zero_stride).is_err());
    assert!(Conv2d::from_tensors(randn(&[2, 3], 1), None, Conv2dParams::default()).is_err());
    let layer = Conv2d::from_tensors(w, None, Conv2dParams::default()).unwrap();
    // Wrong channel count, kernel larger than the input.
    assert!(layer
        .forward(&Var::constant(randn(&[1, 2, 5, 5], 2)))
        .is_err());
    assert!(layer
        .forward(&Var::constant(randn(&[1, 3, 2, 2], 2)))
        .is_err());
}
