//! The CPU's one-pass ReLU gradient and Adam step against tensor-core's composite chains:
//! identical bits (same operations in the same order), for f32 and f64, every decay mode,
//! AMSGrad, sizes above the parallel threshold, and strided inputs (which fall back).

use crate::common::*;
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::{composite, Backend};
use tessera_cpu::CpuTensor;

fn bits(t: &CpuTensor) -> Vec<f64> {
    t.to_dtype(tessera_core::DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

#[test]
fn relu_backward_matches_the_composite_bit_for_bit() {
    for n in [7, 100_003] {
        let mut xv = values(n, 1, -1.0, 1.0);
        xv[0] = 0.0;
        xv[1] = f64::NAN;
        let gv = values(n, 2, -1.0, 1.0);
        for f64_dtype in [false, true] {
            let (x, g) = if f64_dtype {
                (tensor_f64(&xv, &[n]), tensor_f64(&gv, &[n]))
            } else {
                (tensor_f32(&xv, &[n]), tensor_f32(&gv, &[n]))
            };
            let got = cpu().relu_backward(&x, &g).unwrap();
            let want = composite::relu_backward(&x, &g).unwrap();
            assert_same_bits(&bits(&got), &bits(&want), "relu_backward");
        }
    }
    // A transposed gradient takes the composite path and still agrees.
    let x = tensor_f32(&values(12, 3, -1.0, 1.0), &[3, 4]);
    let g = tensor_f32(&values(12, 4, -1.0, 1.0), &[4, 3]).t().unwrap();
    let got = cpu().relu_backward(&x, &g).unwrap();
    assert_same_bits(
        &bits(&got),
        &bits(&composite::relu_backward(&x, &g).unwrap()),
        "strided relu_backward",
    );
}

fn update(coupled: f64, factor: f64, step: i32) -> AdamUpdate {
    let (beta1, beta2, lr) = (0.9, 0.999, 1e-3);
    AdamUpdate {
        beta1,
        beta2,
        step_size: lr / (1.0 - f64::powi(beta1, step)),
        bias_correction2_sqrt: (1.0 - f64::powi(beta2, step)).sqrt(),
        eps: 1e-8,
        coupled_decay: coupled,
        decoupled_factor: factor,
    }
}

fn same(got: &AdamTensors<tessera_cpu::Cpu>, want: &AdamTensors<tessera_cpu::Cpu>, what: &str) {
    assert_same_bits(&bits(&got.param), &bits(&want.param), what);
    assert_same_bits(&bits(&got.exp_avg), &bits(&want.exp_avg), what);
    assert_same_bits(&bits(&got.exp_avg_sq), &bits(&want.exp_avg_sq), what);
    match (&got.max_exp_avg_sq, &want.max_exp_avg_sq) {
        (Some(a), Some(b)) => assert_same_bits(&bits(a), &bits(b), what),
        (None, None) => {}
        _ => panic!("{what}: AMSGrad state present on one side only"),
    }
}

#[test]
fn adam_update_matches_the_composite_bit_for_bit() {
    for n in [5, 70_001] {
        for f64_dtype in [false, true] {
            let make = |seed: u64, lo: f64, hi: f64| {
                let v = values(n, seed, lo, hi);
                if f64_dtype {
                    tensor_f64(&v, &[n])
                } else {
                    tensor_f32(&v, &[n])
                }
            };
            let (p, g, m, v, mx) = (
                make(1, -1.0, 1.0),
                make(2, -1.0, 1.0),
                make(3, -0.1, 0.1),
                make(4, 0.0, 0.01),
                make(5, 0.0, 0.01),
            );
            for (coupled, factor) in [(0.0, 1.0), (0.01, 1.0), (0.0, 0.99999)] {
                for amsgrad in [false, true] {
                    let max = amsgrad.then_some(&mx);
                    let u = update(coupled, factor, 3);
                    let got = cpu().adam_update(&p, &g, &m, &v, max, u).unwrap();
                    let want = composite::adam_update(&p, &g, &m, &v, max, u).unwrap();
                    let what = format!(
                        "n={n} f64={f64_dtype} decay=({coupled},{factor}) amsgrad={amsgrad}"
                    );
                    same(&got, &want, &what);
                }
            }
        }
    }
}
