//! The CPU overrides of conv2d, max/avg pooling and their gradients against tensor-core's
//! composite defaults (the reference every override must match), over strides, paddings,
//! dilations, odd sizes, non-contiguous inputs, batches above and below the thread count, and
//! f32/f64.

use crate::common::*;
use tessera_core::{composite, Backend, Conv2dParams, Pool2dParams};
use tessera_cpu::{Cpu, CpuTensor};

fn to_f64(t: &CpuTensor) -> Vec<f64> {
    t.to_dtype(tessera_core::DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

fn close(got: &CpuTensor, want: &CpuTensor, what: &str) {
    assert_eq!(got.dims(), want.dims(), "{what}: dims");
    assert_close(&to_f64(got), &to_f64(want), 1e-4, 1e-4, what);
}

fn conv_cases() -> Vec<([usize; 4], [usize; 4], Conv2dParams)> {
    let p = |s, pad, d| Conv2dParams {
        stride: s,
        padding: pad,
        dilation: d,
    };
    vec![
        ([4, 3, 9, 8], [5, 3, 3, 3], p((1, 1), (1, 1), (1, 1))),
        ([3, 2, 11, 7], [4, 2, 3, 2], p((2, 3), (2, 1), (1, 1))),
        ([2, 3, 10, 10], [2, 3, 3, 3], p((1, 2), (0, 2), (2, 1))),
        ([1, 4, 8, 9], [6, 4, 5, 5], p((1, 1), (2, 2), (1, 1))),
        ([5, 1, 6, 6], [3, 1, 1, 1], p((1, 1), (0, 0), (1, 1))),
        ([2, 2, 4, 4], [3, 2, 3, 3], p((3, 3), (3, 3), (1, 1))),
        // Width 1 with wide padding: whole kernel columns fall in the padding.
        ([2, 2, 3, 1], [2, 2, 2, 3], p((1, 2), (1, 2), (1, 2))),
        // Unit strides and output as wide as the input (the shifted-block im2col): dilated,
        // and a kernel taller than the image (kernel rows that see no input line).
        ([2, 3, 9, 7], [4, 3, 3, 3], p((1, 1), (2, 2), (2, 2))),
        ([2, 2, 2, 5], [3, 2, 5, 5], p((1, 1), (2, 2), (1, 1))),
    ]
}

#[test]
fn conv2d_and_both_gradients_match_the_composite() {
    let dev = cpu();
    for (case, (xd, wd, p)) in conv_cases().into_iter().enumerate() {
        for f64_dtype in [false, true] {
            let make = |data: &[f64], dims: &[usize]| {
                if f64_dtype {
                    tensor_f64(data, dims)
                } else {
                    tensor_f32(data, dims)
                }
            };
            let x = make(&values(xd.iter().product(), case as u64, -1.0, 1.0), &xd);
            let w = make(
                &values(wd.iter().product(), 50 + case as u64, -1.0, 1.0),
                &wd,
            );
            let what = format!("case {case} f64={f64_dtype}");
            let out = dev.conv2d(&x, &w, p).unwrap();
            close(
                &out,
                &composite::conv2d(&x, &w, p).unwrap(),
                &format!("{what} forward"),
            );
            let g = make(&values(out.numel(), 99, -1.0, 1.0), out.dims());
            close(
                &dev.conv2d_backward_input(&g, &w, &xd, p).unwrap(),
                &composite::conv2d_backward_input(&g, &w, &xd, p).unwrap(),
                &format!("{what} input gradient"),
            );
            close(
                &dev.conv2d_backward_weight(&x, &g, &wd, p).unwrap(),
                &composite::conv2d_backward_weight(&x, &g, &wd, p).unwrap(),
                &format!("{what} weight gradient"),
            );
        }
    }
}

#[test]
fn conv2d_reads_non_contiguous_operands() {
    let dev = cpu();
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    // x as a transposed view ([n, c, w, h] data read as [n, c, h, w]) and w as a step slice.
    let x = tensor_f32(&values(3 * 2 * 6 * 7, 1, -1.0, 1.0), &[3, 2, 7, 6])
        .transpose(2, 3)
        .unwrap();
    let w = tensor_f32(&values(8 * 2 * 9, 2, -1.0, 1.0), &[8, 2, 3, 3])
        .slice(0, 0, 8, 2)
        .unwrap();
    assert!(!x.layout().is_contiguous() && !w.layout().is_contiguous());
    close(
        &dev.conv2d(&x, &w, p).unwrap(),
        &composite::conv2d(&x, &w, p).unwrap(),
        "strided conv2d",
    );
}

#[test]
fn conv2d_at_the_cnn_sizes_matches_a_naive_f64_reference() {
    // The CNN's second layer on a batch of 3: a direct sextuple loop in f64.
    let (n, c, h, w, o) = (3, 32, 14, 14, 8);
    let xv = as_f32(&values(n * c * h * w, 7, -1.0, 1.0));
    let wv = as_f32(&values(o * c * 9, 8, -0.2, 0.2));
    let x = tensor_f32(&xv, &[n, c, h, w]);
    let wt = tensor_f32(&wv, &[o, c, 3, 3]);
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    let got = to_f64(&cpu().conv2d(&x, &wt, p).unwrap());
    let mut want = vec![0.0; n * o * h * w];
    for b in 0..n {
        for oc in 0..o {
            for y in 0..h {
                for xx in 0..w {
                    let mut s = 0.0;
                    for ci in 0..c {
                        for i in 0..3 {
                            for j in 0..3 {
                                let (iy, ix) =
                                    (y as isize + i as isize - 1, xx as isize + j as isize - 1);
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                s += xv[((b * c + ci) * h + iy as usize) * w + ix as usize]
                                    * wv[((oc * c + ci) * 3 + i) * 3 + j];
                            }
                        }
                    }
                    want[((b * o + oc) * h + y) * w + xx] = s;
                }
            }
        }
    }
    assert_close(&got, &want, 1e-5, 1e-5, "conv2d vs naive");
}

fn pool_cases() -> Vec<([usize; 4], Pool2dParams)> {
    let p = |k, s, pad| Pool2dParams {
        kernel: k,
        stride: s,
        padding: pad,
    };
    vec![
        ([4, 3, 8, 8], Pool2dParams::square(2)),
        // Odd sizes: the last row and column fall outside every 2x2 window.
        ([2, 3, 9, 7], Pool2dParams::square(2)),
        ([2, 3, 9, 7], p((3, 3), (2, 2), (1, 1))),
        ([3, 2, 7, 10], p((2, 3), (1, 2), (1, 0))),
        ([64, 32, 28, 28], Pool2dParams::square(2)),
    ]
}

#[test]
fn pooling_and_its_gradients_match_the_composite() {
    let dev = cpu();
    for (case, (xd, p)) in pool_cases().into_iter().enumerate() {
        for f64_dtype in [false, true] {
            let n: usize = xd.iter().product();
            // Few distinct values, so windows hold ties and the first-index rule is exercised.
            let data: Vec<f64> = values(n, case as u64, 0.0, 6.0)
                .iter()
                .map(|v| v.floor())
                .collect();
            let x = if f64_dtype {
                tensor_f64(&data, &xd)
            } else {
                tensor_f32(&data, &xd)
            };
            let what = format!("pool case {case} f64={f64_dtype}");
            let (out, arg) = dev.max_pool2d(&x, p).unwrap();
            let (want_out, want_arg) = composite::max_pool2d(&x, p).unwrap();
            close(&out, &want_out, &format!("{what} max"));
            assert_eq!(
                arg.to_vec::<i64>().unwrap(),
                want_arg.to_vec::<i64>().unwrap(),
                "{what} argmax"
            );
            let g_data = values(out.numel(), 5, -1.0, 1.0);
            let g = if f64_dtype {
                tensor_f64(&g_data, out.dims())
            } else {
                tensor_f32(&g_data, out.dims())
            };
            close(
                &dev.max_pool2d_backward(&g, &arg, &xd, p).unwrap(),
                &composite::max_pool2d_backward(&g, &want_arg, &xd, p).unwrap(),
                &format!("{what} max backward"),
            );
            let avg = dev.avg_pool2d(&x, p).unwrap();
            close(
                &avg,
                &composite::avg_pool2d(&x, p).unwrap(),
                &format!("{what} avg"),
            );
            close(
                &dev.avg_pool2d_backward(&g, &xd, p).unwrap(),
                &composite::avg_pool2d_backward(&g, &xd, p).unwrap(),
                &format!("{what} avg backward"),
            );
        }
    }
}

#[test]
fn max_pooling_propagates_nan_like_argmax() {
    let dev = Cpu::new();
    let x = tensor_f32(
        &[1.0, f64::NAN, 3.0, f64::NAN, 5.0, 6.0, 7.0, 8.0],
        &[1, 1, 2, 4],
    );
    let p = Pool2dParams::square(2);
    let (out, arg) = dev.max_pool2d(&x, p).unwrap();
    let (want_out, want_arg) = composite::max_pool2d(&x, p).unwrap();
    let got: Vec<f64> = to_f64(&out);
    assert!(got[0].is_nan() && got[1].is_nan());
    assert!(to_f64(&want_out)[1].is_nan());
    assert_eq!(
        arg.to_vec::<i64>().unwrap(),
        want_arg.to_vec::<i64>().unwrap()
    );
}

#[test]
fn empty_batches_give_empty_results() {
    let dev = cpu();
    let x = tensor_f32(&[], &[0, 2, 5, 5]);
    let w = tensor_f32(&values(3 * 2 * 9, 1, -1.0, 1.0), &[3, 2, 3, 3]);
    let p = Conv2dParams::default();
    assert_eq!(dev.conv2d(&x, &w, p).unwrap().dims(), [0, 3, 3, 3]);
    let (out, arg) = dev.max_pool2d(&x, Pool2dParams::square(2)).unwrap();
    assert_eq!(
        (out.dims(), arg.dims()),
        ([0, 2, 2, 2].as_slice(), [0, 2, 2, 2].as_slice())
    );
    // A narrowed-away view whose offset lies past the end of its storage.
    let sliced = tensor_f32(&values(4, 2, -1.0, 1.0), &[4])
        .narrow(0, 4, 0)
        .unwrap();
    assert_eq!(dev.relu_backward(&sliced, &sliced).unwrap().numel(), 0);
}
