//! Batched matrix products against a naive f64 triple loop.

use crate::common::*;
use tessera_core::{Error, Layout};
use tessera_cpu::{Cpu, CpuStorage, CpuTensor};

/// `[..batch, m, k] x [..batch, k, n]` on row-major values of the (already broadcast) views.
fn matmul_reference(a: &[f64], b: &[f64], batch: usize, m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; batch * m * n];
    for p in 0..batch {
        for i in 0..m {
            for j in 0..n {
                out[(p * m + i) * n + j] = (0..k)
                    .map(|q| a[(p * m + i) * k + q] * b[(p * k + q) * n + j])
                    .sum();
            }
        }
    }
    out
}

/// Checks `x.matmul(y)` against the reference, given each operand's source data.
fn check(x: &CpuTensor, xd: &[f64], y: &CpuTensor, yd: &[f64], f32_dtype: bool, what: &str) {
    let got = x.matmul(y).unwrap();
    let (xr, yr) = (x.rank(), y.rank());
    let (m, k, n) = (x.dims()[xr - 2], x.dims()[xr - 1], y.dims()[yr - 1]);
    let batch_dims = &got.dims()[..got.rank() - 2];
    let batch: usize = batch_dims.iter().product();
    let mut full_x = batch_dims.to_vec();
    full_x.extend([m, k]);
    let mut full_y = batch_dims.to_vec();
    full_y.extend([k, n]);
    let xv = view_of(xd, &x.broadcast_to(full_x).unwrap());
    let yv = view_of(yd, &y.broadcast_to(full_y).unwrap());
    let want = matmul_reference(&xv, &yv, batch, m, k, n);
    let tol = if f32_dtype {
        1e-5 * (k as f64).sqrt().max(1.0)
    } else {
        1e-12
    };
    assert_close(&got.to_vec_f64().unwrap(), &want, tol, tol, what);
}

#[test]
fn products_of_contiguous_transposed_and_sliced_operands() {
    for f32_dtype in [false, true] {
        let make = |d: &[f64], dims: &[usize]| {
            if f32_dtype {
                (tensor_f32(d, dims), as_f32(d))
            } else {
                (tensor_f64(d, dims), d.to_vec())
            }
        };
        for (m, k, n) in [(1, 1, 1), (3, 4, 5), (17, 9, 33), (64, 70, 1), (1, 100, 40)] {
            let (a, ad) = make(&values(m * k, 1, -1.0, 1.0), &[m, k]);
            let (b, bd) = make(&values(k * n, 2, -1.0, 1.0), &[k, n]);
            let (at, atd) = make(&values(m * k, 3, -1.0, 1.0), &[k, m]);
            let (bt, btd) = make(&values(k * n, 4, -1.0, 1.0), &[n, k]);
            let (at, bt) = (at.t().unwrap(), bt.t().unwrap());
            let what = |s: &str| format!("{s} {m}x{k}x{n} f32={f32_dtype}");
            check(&a, &ad, &b, &bd, f32_dtype, &what("nn"));
            check(&at, &atd, &b, &bd, f32_dtype, &what("tn"));
            check(&a, &ad, &bt, &btd, f32_dtype, &what("nt"));
            check(&at, &atd, &bt, &btd, f32_dtype, &what("tt"));
            // Stepped slices: every other row of a taller lhs, every third column of a wider rhs.
            let (tall, tall_d) = make(&values(2 * m * k, 5, -1.0, 1.0), &[2 * m, k]);
            let (wide, wide_d) = make(&values(k * 3 * n, 6, -1.0, 1.0), &[k, 3 * n]);
            let s1 = tall.slice(0, 1, 2 * m, 2).unwrap();
            let s2 = wide.slice(1, 2, 3 * n, 3).unwrap();
            check(&s1, &tall_d, &s2, &wide_d, f32_dtype, &what("sliced"));
        }
    }
}

#[test]
fn batched_products_with_broadcast_batches() {
    // lhs [2, 3, m, k] vs rhs [3, k, n] (broadcast over the first batch dim: stride 0), and a
    // permuted batch layout.
    let (m, k, n) = (5, 7, 4);
    let ad = values(2 * 3 * m * k, 8, -1.0, 1.0);
    let bd = values(3 * k * n, 9, -1.0, 1.0);
    let a = tensor_f64(&ad, &[2, 3, m, k]);
    let b = tensor_f64(&bd, &[3, k, n]);
    check(&a, &ad, &b, &bd, false, "broadcast batch");
    let ap = tensor_f64(&ad, &[3, 2, m, k])
        .permute(&[1, 0, 2, 3])
        .unwrap();
    check(&ap, &ad, &b, &bd, false, "permuted batch");
    // A single rhs matrix shared by every batch element (all batch strides 0).
    let one = tensor_f64(&bd[..k * n], &[1, 1, k, n]);
    check(&a, &ad, &one, &bd[..k * n], false, "shared rhs");
    // Vector promotions of the Tensor API.
    let v = tensor_f64(&bd[..k], &[k]);
    check(
        &a,
        &ad,
        &v.unsqueeze(1).unwrap(),
        &bd[..k],
        false,
        "matrix-vector",
    );
    assert_eq!(a.matmul(&v).unwrap().dims(), &[2, 3, m]);
}

#[test]
fn many_small_products_run_in_parallel_correctly() {
    // 64 batches of 16x16x16 (rayon across batches) and 3 batches of 200x150x120 (GEMM threads).
    for (batch, m, k, n) in [(64, 16, 16, 16), (3, 200, 150, 120)] {
        let ad = values(batch * m * k, 10, -1.0, 1.0);
        let bd = values(batch * n * k, 11, -1.0, 1.0);
        let a = tensor_f32(&ad, &[batch, m, k]);
        let bt = tensor_f32(&bd, &[batch, n, k]).transpose(1, 2).unwrap();
        check(
            &a,
            &as_f32(&ad),
            &bt,
            &as_f32(&bd),
            true,
            &format!("batch {batch}"),
        );
    }
}

#[test]
fn degenerate_sizes() {
    // k = 0 gives zeros; m = 0 or n = 0 gives an empty result.
    let a = tensor_f32(&[], &[3, 0]);
    let b = tensor_f32(&[], &[0, 4]);
    let z = a.matmul(&b).unwrap();
    assert_eq!(z.dims(), &[3, 4]);
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 12]);
    let e = tensor_f64(&[], &[0, 5])
        .matmul(&tensor_f64(&[1.0; 10], &[5, 2]))
        .unwrap();
    assert_eq!(e.dims(), &[0, 2]);
    let e = tensor_f64(&[1.0; 10], &[2, 5])
        .matmul(&tensor_f64(&[], &[5, 0]))
        .unwrap();
    assert_eq!(e.dims(), &[2, 0]);
    let e = tensor_f64(&[], &[0, 2, 3])
        .matmul(&tensor_f64(&[], &[0, 3, 2]))
        .unwrap();
    assert_eq!(e.dims(), &[0, 2, 2]);
}

#[test]
fn special_values_propagate() {
    let nan = f64::NAN;
    let a = tensor_f64(&[1.0, nan, 0.0, 1.0], &[2, 2]);
    let b = tensor_f64(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let c = a.matmul(&b).unwrap().to_vec_f64().unwrap();
    assert!(c[0].is_nan() && c[1].is_nan());
    assert_eq!(&c[2..], &[3.0, 4.0]);
}

#[test]
fn invalid_requests_are_errors() {
    let l = Layout::contiguous([2, 2]);
    let i = CpuStorage::I64(vec![1; 4]);
    assert!(matches!(
        tessera_core::direct::matmul(&Cpu, (&i, &l), (&i, &l)),
        Err(Error::UnsupportedDType { op: "matmul", .. })
    ));
    let f = CpuStorage::F32(vec![1.0; 4]);
    assert!(matches!(
        tessera_core::direct::matmul(&Cpu, (&f, &l), (&CpuStorage::F64(vec![1.0; 4]), &l)),
        Err(Error::DTypeMismatch { .. })
    ));
    let wrong_k = Layout::contiguous([3, 2]);
    assert!(matches!(
        tessera_core::direct::matmul(&Cpu, (&f, &l), (&CpuStorage::F32(vec![1.0; 6]), &wrong_k)),
        Err(Error::MatmulShape { .. })
    ));
    // A layout that reaches past its storage is refused before any unsafe code runs.
    let too_big = Layout::contiguous([3, 2]);
    assert!(tessera_core::direct::matmul(&Cpu, (&f, &too_big), (&f, &l)).is_err());
}

/// `x.matmul_bias(y, bias)` against the reference product plus the bias, for operands that take
/// every GEMM path: the blocked kernels with edge tiles and several blocks along k, the GEMV of
/// one row or column, an empty inner dimension, batches (one task per product, and products
/// split over threads), a transposed rhs (a linear layer's `Wᵀ`) and a strided bias.
#[test]
fn products_with_a_bias_add_it_to_every_row() {
    let cases = [
        (1, 3, 4, 5),
        (1, 17, 9, 33),
        (1, 40, 300, 70),
        (1, 1, 100, 40),
        (1, 64, 70, 1),
        (1, 5, 0, 6),
        (64, 16, 16, 16),
        (3, 200, 150, 120),
    ];
    for f32_dtype in [false, true] {
        let make = |d: &[f64], dims: &[usize]| {
            if f32_dtype {
                (tensor_f32(d, dims), as_f32(d))
            } else {
                (tensor_f64(d, dims), d.to_vec())
            }
        };
        for (batch, m, k, n) in cases {
            let (a, ad) = make(&values(batch * m * k, 21, -1.0, 1.0), &[batch, m, k]);
            let (bt, btd) = make(&values(batch * n * k, 22, -1.0, 1.0), &[batch, n, k]);
            let bt = bt.transpose(1, 2).unwrap();
            // Every other element of a vector twice as long.
            let (bias, bias_d) = make(&values(2 * n, 23, -2.0, 2.0), &[2 * n]);
            let bias = bias.slice(0, 0, 2 * n, 2).unwrap();
            let got = a.matmul_bias(&bt, &bias).unwrap();
            assert_eq!(got.dims(), &[batch, m, n]);
            let yv = view_of(&btd, &bt);
            let mut want = matmul_reference(&ad, &yv, batch, m, k, n);
            for (i, w) in want.iter_mut().enumerate() {
                *w += bias_d[2 * (i % n)];
            }
            let tol = if f32_dtype {
                1e-5 * (k as f64).sqrt().max(1.0)
            } else {
                1e-12
            };
            let what = format!("{batch}x{m}x{k}x{n} f32={f32_dtype}");
            assert_close(&got.to_vec_f64().unwrap(), &want, tol, tol, &what);
        }
    }
}

#[test]
fn a_bias_of_the_wrong_length_or_rank_is_a_typed_error() {
    let a = tensor_f32(&values(6, 1, -1.0, 1.0), &[2, 3]);
    let b = tensor_f32(&values(12, 2, -1.0, 1.0), &[3, 4]);
    for dims in [&[3][..], &[1, 4], &[5]] {
        let bias = tensor_f32(&values(dims.iter().product(), 3, -1.0, 1.0), dims);
        assert!(
            matches!(a.matmul_bias(&b, &bias), Err(Error::InvalidArgument { .. })),
            "bias {dims:?}"
        );
    }
    let bias = tensor_f32(&values(4, 3, -1.0, 1.0), &[4]);
    let vector = tensor_f32(&values(3, 4, -1.0, 1.0), &[3]);
    assert!(matches!(
        vector.matmul_bias(&b, &bias),
        Err(Error::InvalidArgument { .. })
    ));
    let wrong_inner = tensor_f32(&values(8, 5, -1.0, 1.0), &[2, 4]);
    assert!(matches!(
        wrong_inner.matmul_bias(&b, &bias),
        Err(Error::MatmulShape { .. })
    ));
}
