//! Reductions and arg-reductions.

use crate::common::*;
use tessera_core::{ArgReduceOp, DType, Layout, ReduceOp};
use tessera_cpu::{Cpu, CpuStorage, CpuTensor};

/// Naive reduction of the row-major values `vals` of shape `dims` over `axes` (kept as 1).
fn reduce_reference(op: ReduceOp, vals: &[f64], dims: &[usize], axes: &[usize]) -> Vec<f64> {
    let out_dims: Vec<usize> = dims
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect();
    let init = match op {
        ReduceOp::Sum => 0.0,
        ReduceOp::Prod => 1.0,
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    };
    let mut out = vec![init; out_dims.iter().product()];
    for (p, &v) in vals.iter().enumerate() {
        let mut index = unravel(p, dims);
        for &a in axes {
            index[a] = 0;
        }
        let o = &mut out[ravel(&index, &out_dims)];
        *o = match op {
            ReduceOp::Sum => *o + v,
            ReduceOp::Prod => *o * v,
            ReduceOp::Max if o.is_nan() || v.is_nan() => f64::NAN,
            ReduceOp::Min if o.is_nan() || v.is_nan() => f64::NAN,
            ReduceOp::Max => o.max(v),
            ReduceOp::Min => o.min(v),
        };
    }
    out
}

/// Every subset of `0..rank`.
fn axis_sets(rank: usize) -> Vec<Vec<usize>> {
    (0..1usize << rank)
        .map(|mask| (0..rank).filter(|a| mask & (1 << a) != 0).collect())
        .collect()
}

#[test]
fn reductions_over_every_axis_set_of_every_view() {
    for op in ReduceOp::ALL {
        let (lo, hi) = if op == ReduceOp::Prod {
            (0.6, 1.5)
        } else {
            (-2.0, 2.0)
        };
        let data = values(120, 31, lo, hi);
        for f32_dtype in [false, true] {
            let (base, stored) = if f32_dtype {
                (tensor_f32(&data, &[4, 6, 5]), as_f32(&data))
            } else {
                (tensor_f64(&data, &[4, 6, 5]), data.clone())
            };
            for (name, view) in views(&base) {
                let vals = view_of(&stored, &view);
                for axes in axis_sets(3).into_iter().filter(|a| !a.is_empty()) {
                    let signed: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
                    let got = view.reduce(op, &signed, true).unwrap();
                    let want = reduce_reference(op, &vals, view.dims(), &axes);
                    let tol = if f32_dtype { 1e-5 } else { 1e-12 };
                    let what = format!("{} f32={f32_dtype} {name} axes {axes:?}", op.name());
                    assert_close(&got.to_vec_f64().unwrap(), &want, tol, tol, &what);
                }
            }
        }
    }
}

#[test]
fn integer_reductions_wrap_and_keep_exact_values() {
    let data: Vec<i64> = (0..24).map(|i| (i * 37 % 11) - 5).collect();
    let x = CpuTensor::from_vec(data.clone(), [2, 3, 4], &cpu())
        .unwrap()
        .permute(&[2, 0, 1])
        .unwrap();
    let as_f: Vec<f64> = data.iter().map(|&v| v as f64).collect();
    let vals = view_of(&as_f, &x);
    for op in ReduceOp::ALL {
        for axes in [vec![0], vec![1, 2], vec![0, 2]] {
            let signed: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
            let got = x.reduce(op, &signed, true).unwrap();
            assert_eq!(got.dtype(), DType::I64);
            let want = reduce_reference(op, &vals, x.dims(), &axes);
            assert_eq!(got.to_vec_f64().unwrap(), want, "{} {axes:?}", op.name());
        }
    }
    let big = CpuTensor::from_vec(vec![i64::MAX, 1], [2], &cpu()).unwrap();
    assert_eq!(big.sum_all().unwrap().to_scalar::<i64>().unwrap(), i64::MIN);
    // Bool tensors reduce as i64 (tensor-core casts); the backend itself rejects bool.
    let l = Layout::contiguous([2]);
    assert!(tessera_core::direct::reduce(
        &Cpu,
        ReduceOp::Sum,
        &CpuStorage::Bool(vec![1, 1]),
        &l,
        &[0]
    )
    .is_err());
}

#[test]
fn max_and_min_reductions_propagate_nan() {
    let nan = f64::NAN;
    let x = tensor_f32(&[1.0, nan, 3.0, 4.0, 5.0, 6.0, nan, 0.0, -1.0], &[3, 3]);
    for op in [ReduceOp::Max, ReduceOp::Min] {
        let rows = x.reduce(op, &[1], false).unwrap().to_vec_f64().unwrap();
        let cols = x.reduce(op, &[0], false).unwrap().to_vec_f64().unwrap();
        let (r1, c2) = if op == ReduceOp::Max {
            (6.0, 6.0)
        } else {
            (4.0, -1.0)
        };
        assert_same_bits(&rows, &[nan, r1, nan], "rows");
        assert_same_bits(&cols, &[nan, nan, c2], "cols");
    }
    let s = x.sum(&[1], false).unwrap().to_vec_f64().unwrap();
    assert_same_bits(&s, &[nan, 15.0, nan], "sum");
}

#[test]
fn empty_reductions_give_the_identity() {
    let e = tensor_f64(&[], &[3, 0, 2]);
    let s = e.sum(&[1], true).unwrap();
    assert_eq!(s.dims(), &[3, 1, 2]);
    assert_eq!(s.to_vec_f64().unwrap(), vec![0.0; 6]);
    assert_eq!(
        e.prod(&[1], false).unwrap().to_vec_f64().unwrap(),
        vec![1.0; 6]
    );
    assert!(e.sum(&[0], true).unwrap().to_vec_f64().unwrap().is_empty());
    // The backend itself returns the identity for an empty max (tensor-core rejects it first).
    let st =
        tessera_core::direct::reduce(&Cpu, ReduceOp::Max, e.storage(), e.layout(), &[1]).unwrap();
    assert_eq!(st.as_f64_slice().unwrap(), &[f64::NEG_INFINITY; 6]);
    let scalar = CpuTensor::scalar(4.5f32, &cpu()).unwrap();
    assert_eq!(scalar.sum_all().unwrap().to_scalar::<f32>().unwrap(), 4.5);
    assert_eq!(
        scalar.max(&[], false).unwrap().to_scalar::<f32>().unwrap(),
        4.5
    );
    // Reducing no axes through the backend is a plain copy.
    let x = tensor_f64(&[1.0, 2.0, 3.0, 4.0], &[2, 2]).t().unwrap();
    let copy =
        tessera_core::direct::reduce(&Cpu, ReduceOp::Sum, x.storage(), x.layout(), &[]).unwrap();
    assert_eq!(copy.as_f64_slice().unwrap(), &[1.0, 3.0, 2.0, 4.0]);
}

#[test]
fn reductions_of_broadcast_inputs() {
    let row = tensor_f64(&[1.0, 2.0, 3.0], &[3]);
    let b = row.broadcast_to([1000, 3]).unwrap();
    assert_eq!(
        b.sum(&[0], false).unwrap().to_vec_f64().unwrap(),
        vec![1000.0, 2000.0, 3000.0]
    );
    assert_eq!(b.sum_all().unwrap().to_scalar_f64().unwrap(), 6000.0);
    assert_eq!(
        b.max(&[1], false).unwrap().to_vec_f64().unwrap(),
        vec![3.0; 1000]
    );
}

#[test]
fn large_f32_sums_are_accurate() {
    // 2^20 values in [0, 1): a sequential f32 sum drifts by ~1e-4 relative, pairwise by ~1e-7.
    let n = 1 << 20;
    let data = as_f32(&values(n, 41, 0.0, 1.0));
    let x = tensor_f32(&data, &[n]);
    let want: f64 = data.iter().sum();
    let got = x.sum_all().unwrap().to_scalar_f64().unwrap();
    assert!(((got - want) / want).abs() < 1e-6, "got {got}, want {want}");
    // Same through a transposed view (strided full reduction) and along columns.
    let t = x.reshape([1024, 1024]).unwrap().t().unwrap();
    let got_t = t.sum_all().unwrap().to_scalar_f64().unwrap();
    assert!(
        ((got_t - want) / want).abs() < 1e-6,
        "transposed: got {got_t}, want {want}"
    );
    let cols = x.reshape([1024, 1024]).unwrap().sum(&[0], false).unwrap();
    let want_cols: Vec<f64> = (0..1024)
        .map(|j| (0..1024).map(|i| data[i * 1024 + j]).sum())
        .collect();
    assert_close(
        &cols.to_vec_f64().unwrap(),
        &want_cols,
        1e-6,
        0.0,
        "column sums",
    );
}

#[test]
fn long_f32_sums_of_a_constant_do_not_drift() {
    // A sequential f32 sum of 2^20 copies of 0.1 is off by about 4%; a naive column sum of
    // 65536 rows by about 0.03%. Both paths must stay within 2e-6 of the exact value.
    let tenth = 0.1f32 as f64;
    let n = 1 << 20;
    let x = CpuTensor::full([n], 0.1, DType::F32, &cpu()).unwrap();
    let got = x.sum_all().unwrap().to_scalar_f64().unwrap();
    let want = tenth * n as f64;
    assert!(
        ((got - want) / want).abs() < 2e-6,
        "sum_all: got {got}, want {want}"
    );
    for dims in [[65536, 16], [4096, 256]] {
        let cols = x.reshape(dims).unwrap().sum(&[0], false).unwrap();
        let want = tenth * dims[0] as f64;
        for got in cols.to_vec_f64().unwrap() {
            assert!(
                ((got - want) / want).abs() < 2e-6,
                "{dims:?}: got {got}, want {want}"
            );
        }
    }
    // Strided runs: every other column (outputs not contiguous), a broadcast (stride 0) axis.
    let every_other = x.reshape([65536, 16]).unwrap().slice(1, 0, 16, 2).unwrap();
    let one = CpuTensor::full([1, 3], 0.1, DType::F32, &cpu()).unwrap();
    let broadcast = one.broadcast_to([65536, 3]).unwrap();
    for t in [every_other, broadcast] {
        let want = tenth * 65536.0;
        for got in t.sum(&[0], false).unwrap().to_vec_f64().unwrap() {
            assert!(
                ((got - want) / want).abs() < 2e-6,
                "strided: got {got}, want {want}"
            );
        }
    }
}

#[test]
fn large_reductions_take_each_parallel_path_correctly() {
    // (dims, axes, view): outputs many/few x reduced contiguous/row-wise/strided.
    let cases: Vec<(Vec<usize>, Vec<usize>, bool)> = vec![
        (vec![4096, 33], vec![1], false), // many outputs, contiguous reduced axis
        (vec![3000, 70], vec![0], false), // many outputs, row-wise
        (vec![100_000, 5], vec![0], false), // few outputs, strided
        (vec![50_000, 16], vec![0], false), // few outputs, row-wise, split reduced range
        (vec![40, 1000, 3], vec![1], false), // middle axis
        (vec![300, 400], vec![0, 1], true), // full reduction of a transposed view
        (vec![7, 9000], vec![1], true),   // transposed: reduced axis strided
    ];
    for (dims, axes, transpose) in cases {
        let n: usize = dims.iter().product();
        let data = as_f32(&values(n, 51, -1.0, 1.0));
        let mut x = tensor_f32(&data, &dims);
        if transpose {
            x = tensor_f32(&data, &[dims[1], dims[0]]).t().unwrap();
        }
        let vals = view_of(&data, &x);
        let signed: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
            let got = x.reduce(op, &signed, true).unwrap().to_vec_f64().unwrap();
            let want = reduce_reference(op, &vals, x.dims(), &axes);
            let what = format!(
                "{} {dims:?} axes {axes:?} transposed={transpose}",
                op.name()
            );
            assert_close(&got, &want, 1e-5, 1e-3, &what);
        }
    }
    // A NaN deep inside a large full max reduction is found whichever chunk holds it.
    let mut data = values(200_000, 52, -1.0, 1.0);
    data[123_457] = f64::NAN;
    let x = tensor_f64(&data, &[200_000]);
    assert!(x.max(&[], false).unwrap().to_scalar_f64().unwrap().is_nan());
    assert!(x.min(&[], false).unwrap().to_scalar_f64().unwrap().is_nan());
}

/// Naive arg-reduction along `axis` of row-major `vals` of shape `dims`.
fn arg_reference(op: ArgReduceOp, vals: &[f64], dims: &[usize], axis: usize) -> Vec<i64> {
    let mut out_dims = dims.to_vec();
    out_dims[axis] = 1;
    let n_out: usize = out_dims.iter().product();
    (0..n_out)
        .map(|o| {
            let mut index = unravel(o, &out_dims);
            let mut best: Option<(f64, usize)> = None;
            for i in 0..dims[axis] {
                index[axis] = i;
                let v = vals[ravel(&index, dims)];
                best = match best {
                    None => Some((v, i)),
                    Some((b, _)) if b.is_nan() => best,
                    Some(_) if v.is_nan() => Some((v, i)),
                    Some((b, _)) if op == ArgReduceOp::ArgMax && v > b => Some((v, i)),
                    Some((b, _)) if op == ArgReduceOp::ArgMin && v < b => Some((v, i)),
                    _ => best,
                };
            }
            best.map_or(0, |(_, i)| i as i64)
        })
        .collect()
}

#[test]
fn arg_reductions_take_the_first_tie_and_the_first_nan() {
    // A 0.5 grid gives many ties; a few NaNs.
    let mut data: Vec<f64> = values(120, 61, -2.0, 2.0)
        .into_iter()
        .map(|x| (x * 2.0).round() / 2.0)
        .collect();
    for i in [7, 50, 51, 99] {
        data[i] = f64::NAN;
    }
    for f32_dtype in [false, true] {
        let base = if f32_dtype {
            tensor_f32(&data, &[4, 6, 5])
        } else {
            tensor_f64(&data, &[4, 6, 5])
        };
        for (name, view) in views(&base) {
            let vals = view_of(&data, &view);
            for axis in 0..3 {
                for op in [ArgReduceOp::ArgMax, ArgReduceOp::ArgMin] {
                    let got = match op {
                        ArgReduceOp::ArgMax => view.argmax(axis as isize, true),
                        ArgReduceOp::ArgMin => view.argmin(axis as isize, true),
                    }
                    .unwrap();
                    assert_eq!(got.dtype(), DType::I64);
                    let want = arg_reference(op, &vals, view.dims(), axis);
                    assert_eq!(
                        got.to_vec::<i64>().unwrap(),
                        want,
                        "{} {name} axis {axis}",
                        op.name()
                    );
                }
            }
        }
    }
    let ints = CpuTensor::from_vec(vec![3i64, 9, 9, -2, -2, 0], [6], &cpu()).unwrap();
    assert_eq!(
        ints.argmax(0, false).unwrap().to_scalar::<i64>().unwrap(),
        1
    );
    assert_eq!(
        ints.argmin(0, false).unwrap().to_scalar::<i64>().unwrap(),
        3
    );
}

#[test]
fn large_arg_reductions_in_parallel() {
    // One long axis (split across threads): ties and a NaN late in the vector.
    let n = 300_000;
    let mut data: Vec<f64> = values(n, 71, 0.0, 100.0)
        .into_iter()
        .map(f64::floor)
        .collect();
    data[10] = 100.0;
    data[250_000] = 100.0;
    let x = tensor_f64(&data, &[n]);
    assert_eq!(x.argmax(0, false).unwrap().to_scalar::<i64>().unwrap(), 10);
    let want_min = arg_reference(ArgReduceOp::ArgMin, &data, &[n], 0)[0];
    assert_eq!(
        x.argmin(0, false).unwrap().to_scalar::<i64>().unwrap(),
        want_min
    );
    data[200_001] = f64::NAN;
    data[280_000] = f64::NAN;
    let x = tensor_f32(&data, &[n]);
    assert_eq!(
        x.argmax(0, false).unwrap().to_scalar::<i64>().unwrap(),
        200_001
    );
    assert_eq!(
        x.argmin(0, false).unwrap().to_scalar::<i64>().unwrap(),
        200_001
    );
    // Many outputs along the last axis and along a strided first axis.
    let data = values(5000 * 20, 72, -1.0, 1.0);
    let m = tensor_f64(&data, &[5000, 20]);
    for axis in [0usize, 1] {
        let got = m
            .argmax(axis as isize, false)
            .unwrap()
            .to_vec::<i64>()
            .unwrap();
        assert_eq!(
            got,
            arg_reference(ArgReduceOp::ArgMax, &data, &[5000, 20], axis)
        );
    }
}
