//! The fused softmax family against the composite defaults and a naive f64 reference.

use crate::common::*;
use tessera_core::composite;
use tessera_cpu::CpuTensor;

/// Naive f64 log-sum-exp of one row.
fn lse_reference(row: &[f64]) -> f64 {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, |a, b| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            a.max(b)
        }
    });
    let shift = if m.is_infinite() { 0.0 } else { m };
    row.iter().map(|v| (v - shift).exp()).sum::<f64>().ln() + shift
}

/// Checks the three fused ops on `x` (values `vals`, row-major) against both references.
fn check(x: &CpuTensor, vals: &[f64], f32_dtype: bool, what: &str) {
    let last = x.rank() - 1;
    let n = x.dims()[last];
    let tol = if f32_dtype { 3e-6 } else { 1e-13 };
    let lse: Vec<f64> = vals.chunks(n).map(lse_reference).collect();
    let soft: Vec<f64> = vals
        .iter()
        .enumerate()
        .map(|(i, v)| (v - lse[i / n]).exp())
        .collect();
    let log_soft: Vec<f64> = vals
        .iter()
        .enumerate()
        .map(|(i, v)| v - lse[i / n])
        .collect();

    let fused = x.softmax(-1).unwrap();
    assert!(fused.is_contiguous());
    let default = composite::softmax(x, last).unwrap();
    let got = fused.to_vec_f64().unwrap();
    assert_close(
        &got,
        &default.to_vec_f64().unwrap(),
        tol,
        tol,
        &format!("softmax vs composite {what}"),
    );
    assert_close(&got, &soft, tol, tol, &format!("softmax vs f64 {what}"));

    let fused = x.log_softmax(-1).unwrap().to_vec_f64().unwrap();
    let default = composite::log_softmax(x, last)
        .unwrap()
        .to_vec_f64()
        .unwrap();
    assert_close(
        &fused,
        &default,
        tol,
        tol,
        &format!("log_softmax vs composite {what}"),
    );
    assert_close(
        &fused,
        &log_soft,
        tol,
        tol,
        &format!("log_softmax vs f64 {what}"),
    );

    let fused = x.logsumexp(-1, true).unwrap();
    let mut kept = x.dims().to_vec();
    kept[last] = 1;
    assert_eq!(fused.dims(), &kept[..]);
    let default = composite::logsumexp(x, last).unwrap().to_vec_f64().unwrap();
    let fused = fused.to_vec_f64().unwrap();
    assert_close(
        &fused,
        &default,
        tol,
        tol,
        &format!("logsumexp vs composite {what}"),
    );
    assert_close(&fused, &lse, tol, tol, &format!("logsumexp vs f64 {what}"));
}

#[test]
fn fused_rows_match_the_composites_on_every_view() {
    let data = values(120, 101, -4.0, 4.0);
    for f32_dtype in [false, true] {
        let (base, stored) = if f32_dtype {
            (tensor_f32(&data, &[4, 6, 5]), as_f32(&data))
        } else {
            (tensor_f64(&data, &[4, 6, 5]), data.clone())
        };
        for (name, view) in views(&base) {
            check(
                &view,
                &view_of(&stored, &view),
                f32_dtype,
                &format!("{name} f32={f32_dtype}"),
            );
        }
        // Rank 1 and a stride-0 last axis.
        let v = base.narrow(0, 0, 1).unwrap().reshape([30]).unwrap();
        check(&v, &stored[..30], f32_dtype, "rank 1");
        let b = base
            .narrow(2, 0, 1)
            .unwrap()
            .broadcast_to([4, 6, 7])
            .unwrap();
        check(&b, &view_of(&stored, &b), f32_dtype, "broadcast last axis");
    }
}

#[test]
fn fused_rows_handle_special_values_like_the_composites() {
    let inf = f64::INFINITY;
    let nan = f64::NAN;
    let rows = [
        [1000.0, 1001.0, 999.0, -1000.0],
        [-inf, -inf, -inf, -inf],
        [inf, 1.0, 2.0, 3.0],
        [-inf, 0.0, 1.0, -inf],
        [1.0, nan, 2.0, 3.0],
    ];
    let data: Vec<f64> = rows.iter().flatten().cloned().collect();
    for f32_dtype in [false, true] {
        let x = if f32_dtype {
            tensor_f32(&data, &[5, 4])
        } else {
            tensor_f64(&data, &[5, 4])
        };
        let pairs = [
            (x.softmax(-1).unwrap(), composite::softmax(&x, 1).unwrap()),
            (
                x.log_softmax(-1).unwrap(),
                composite::log_softmax(&x, 1).unwrap(),
            ),
            (
                x.logsumexp(-1, true).unwrap(),
                composite::logsumexp(&x, 1).unwrap(),
            ),
        ];
        for (fused, default) in pairs {
            let (f, d) = (fused.to_vec_f64().unwrap(), default.to_vec_f64().unwrap());
            assert_close(&f, &d, 1e-6, 1e-6, &format!("special rows f32={f32_dtype}"));
        }
        let lse = x.logsumexp(-1, false).unwrap().to_vec_f64().unwrap();
        assert!((lse[0] - (1001.0 + (1.0 + (-1f64).exp() + (-2f64).exp()).ln())).abs() < 1e-4);
        assert!(lse[1] == f64::NEG_INFINITY && lse[2] == inf && lse[4].is_nan());
    }
}

#[test]
fn other_axes_use_the_composite_and_large_inputs_run_in_parallel() {
    let data = values(60, 102, -3.0, 3.0);
    let x = tensor_f64(&data, &[3, 4, 5]);
    for axis in [0isize, 1] {
        let got = x.softmax(axis).unwrap().to_vec_f64().unwrap();
        let want = composite::softmax(&x, axis as usize)
            .unwrap()
            .to_vec_f64()
            .unwrap();
        assert_eq!(got, want);
    }
    // 2000 rows of 100 (parallel rows), also through a transposed view.
    let big = values(200_000, 103, -5.0, 5.0);
    let x = tensor_f32(&big, &[2000, 100]);
    check(&x, &as_f32(&big), true, "large");
    let t = tensor_f32(&big, &[100, 2000]).t().unwrap();
    check(&t, &view_of(&as_f32(&big), &t), true, "large transposed");
}
