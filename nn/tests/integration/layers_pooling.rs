//! MaxPool2d and AvgPool2d against naive window loops.

use tessera_autograd::Var;
use tessera_core::{DType, Pool2dParams, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{AvgPool2d, MaxPool2d};
use tessera_nn::{Forward, Module};

fn dev() -> Cpu {
    Cpu::new()
}

/// Naive pooling over `[n, c, h, w]`: padding is `-inf` for max and `0` (counted) for average.
fn naive_pool(x: &[f64], d: [usize; 4], p: Pool2dParams, max: bool) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, w] = d;
    let oh = (h + 2 * p.padding.0 - p.kernel.0) / p.stride.0 + 1;
    let ow = (w + 2 * p.padding.1 - p.kernel.1) / p.stride.1 + 1;
    let mut out = Vec::with_capacity(n * c * oh * ow);
    for plane in 0..n * c {
        for y in 0..oh {
            for z in 0..ow {
                let mut acc = if max { f64::NEG_INFINITY } else { 0.0 };
                for i in 0..p.kernel.0 {
                    for j in 0..p.kernel.1 {
                        let iy = (y * p.stride.0 + i) as isize - p.padding.0 as isize;
                        let ix = (z * p.stride.1 + j) as isize - p.padding.1 as isize;
                        let v = if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                            if max {
                                f64::NEG_INFINITY
                            } else {
                                0.0
                            }
                        } else {
                            x[(plane * h + iy as usize) * w + ix as usize]
                        };
                        acc = if max { acc.max(v) } else { acc + v };
                    }
                }
                if !max {
                    acc /= (p.kernel.0 * p.kernel.1) as f64;
                }
                out.push(acc);
            }
        }
    }
    (out, [n, c, oh, ow])
}

fn cases() -> Vec<Pool2dParams> {
    vec![
        Pool2dParams::square(2),
        Pool2dParams {
            kernel: (3, 2),
            stride: (2, 1),
            padding: (1, 1),
        },
        Pool2dParams {
            kernel: (2, 3),
            stride: (1, 2),
            padding: (0, 1),
        },
    ]
}

fn check(max: bool) {
    let d = [2, 3, 6, 7];
    for (k, params) in cases().into_iter().enumerate() {
        let x = Tensor::randn(d, DType::F64, k as u64, &dev()).unwrap();
        let xv = x.to_vec_f64().unwrap();
        let y = if max {
            MaxPool2d::new(params).unwrap().forward(&Var::constant(x))
        } else {
            AvgPool2d::new(params).unwrap().forward(&Var::constant(x))
        }
        .unwrap()
        .value();
        let (expected, dims) = naive_pool(&xv, d, params, max);
        assert_eq!(y.dims(), dims.as_slice(), "case {k}");
        for (a, e) in y.to_vec_f64().unwrap().iter().zip(&expected) {
            assert!((a - e).abs() < 1e-12, "case {k}: {a} vs {e}");
        }
    }
}

#[test]
fn max_pool_matches_naive_windows() {
    check(true);
}

#[test]
fn avg_pool_matches_naive_windows_counting_padding() {
    check(false);
}

#[test]
fn square_pools_halve_the_spatial_size_and_have_no_parameters() {
    let x = Tensor::from_vec(
        (0..16).map(|v| v as f64).collect::<Vec<_>>(),
        [1, 1, 4, 4],
        &dev(),
    )
    .unwrap();
    let pool = MaxPool2d::square(2).unwrap();
    let y = Forward::<Cpu>::forward(&pool, &Var::constant(x.clone())).unwrap();
    assert_eq!(
        y.value().to_vec::<f64>().unwrap(),
        vec![5.0, 7.0, 13.0, 15.0]
    );
    let avg = AvgPool2d::square(2).unwrap();
    let y = Forward::<Cpu>::forward(&avg, &Var::constant(x)).unwrap();
    assert_eq!(
        y.value().to_vec::<f64>().unwrap(),
        vec![2.5, 4.5, 10.5, 12.5]
    );
    assert!(Module::<Cpu>::parameters(&pool).is_empty());
}

#[test]
fn pools_reject_empty_windows_and_bad_inputs() {
    assert!(MaxPool2d::square(0).is_err());
    let zero_stride = Pool2dParams {
        kernel: (2, 2),
        stride: (0, 1),
        padding: (0, 0),
    };
    assert!(AvgPool2d::new(zero_stride).is_err());
    let pool = MaxPool2d::square(3).unwrap();
    let small = Tensor::<Cpu>::zeros([1, 1, 2, 2], DType::F64, &dev()).unwrap();
    assert!(pool.forward(&Var::constant(small)).is_err());
    let rank3 = Tensor::<Cpu>::zeros([1, 4, 4], DType::F64, &dev()).unwrap();
    assert!(pool.forward(&Var::constant(rank3)).is_err());
}
