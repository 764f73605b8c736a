//! index_select, gather and scatter_add.

use crate::common::*;
use tessera_core::{DType, Error};
use tessera_cpu::CpuTensor;

fn indices(v: &[i64]) -> CpuTensor {
    CpuTensor::from_vec(v.to_vec(), [v.len()], &cpu()).unwrap()
}

/// Naive index_select on the row-major values of a view.
fn index_select_reference(vals: &[f64], dims: &[usize], axis: usize, idx: &[i64]) -> Vec<f64> {
    let mut out_dims = dims.to_vec();
    out_dims[axis] = idx.len();
    (0..out_dims.iter().product())
        .map(|o| {
            let mut index = unravel(o, &out_dims);
            index[axis] = idx[index[axis]] as usize;
            vals[ravel(&index, dims)]
        })
        .collect()
}

#[test]
fn index_select_on_every_view_and_axis() {
    let data = values(120, 81, -1.0, 1.0);
    let base = tensor_f64(&data, &[4, 6, 5]);
    for (name, view) in views(&base) {
        let vals = view_of(&data, &view);
        for axis in 0..3 {
            let size = view.dims()[axis] as i64;
            let idx: Vec<i64> = vec![size - 1, 0, size / 2, size - 1];
            let got = view.index_select(axis as isize, &indices(&idx)).unwrap();
            let want = index_select_reference(&vals, view.dims(), axis, &idx);
            assert_eq!(got.to_vec_f64().unwrap(), want, "{name} axis {axis}");
        }
    }
    // Strided index tensor, and other dtypes.
    let idx = CpuTensor::from_vec(vec![2i64, 9, 0, 9, 1, 9], [6], &cpu())
        .unwrap()
        .slice(0, 0, 6, 2)
        .unwrap();
    let b = CpuTensor::from_vec(vec![1u8, 0, 1, 1, 0, 0], [3, 2], &cpu()).unwrap();
    assert_eq!(
        b.index_select(0, &idx).unwrap().to_vec::<u8>().unwrap(),
        vec![0, 0, 1, 0, 1, 1]
    );
    let empty = b.index_select(1, &indices(&[])).unwrap();
    assert_eq!(empty.dims(), &[3, 0]);
}

#[test]
fn index_select_rejects_out_of_range_indices() {
    let x = tensor_f32(&[1.0, 2.0, 3.0], &[3]);
    for bad in [3i64, -1, i64::MIN] {
        let err = x.index_select(0, &indices(&[0, bad])).unwrap_err();
        assert_eq!(
            err,
            Error::IndexOutOfRange {
                op: "index_select",
                index: bad,
                size: 3
            }
        );
    }
    let float_idx = tensor_f32(&[0.0], &[1]);
    assert!(matches!(
        x.index_select(0, &float_idx),
        Err(Error::DTypeMismatch { .. })
    ));
}

#[test]
fn large_index_select_rows_in_parallel() {
    // An embedding lookup: 5000 rows of width 64 picked from a 1000-row table.
    let table_d = values(1000 * 64, 82, -1.0, 1.0);
    let table = tensor_f32(&table_d, &[1000, 64]);
    let idx: Vec<i64> = (0..5000).map(|i| (i * 7919 % 1000) as i64).collect();
    let got = table.index_select(0, &indices(&idx)).unwrap();
    let want = index_select_reference(&as_f32(&table_d), &[1000, 64], 0, &idx);
    assert_eq!(got.to_vec_f64().unwrap(), want);
    // Along the last axis of a transposed table (single-element rows).
    let tt = table.t().unwrap();
    let cols: Vec<i64> = (0..700).map(|i| (i * 13 % 1000) as i64).collect();
    let got = tt.index_select(1, &indices(&cols)).unwrap();
    let want = index_select_reference(&view_of(&as_f32(&table_d), &tt), tt.dims(), 1, &cols);
    assert_eq!(got.to_vec_f64().unwrap(), want);
}

#[test]
fn gather_picks_per_element_on_strided_inputs() {
    let data = values(60, 83, -1.0, 1.0);
    let x = tensor_f64(&data, &[5, 12]).t().unwrap(); // [12, 5], strided
    let xv = view_of(&data, &x);
    // indices [3, 4] along axis 1 (size 5) and [7, 2] along axis 0 (size 12)
    for (axis, idx_dims) in [(1usize, [3usize, 4usize]), (0, [7, 2])] {
        let size = x.dims()[axis];
        let n: usize = idx_dims.iter().product();
        let idx_v: Vec<i64> = (0..n).map(|i| ((i * 5 + 3) % size) as i64).collect();
        // Make the index tensor itself a transposed view.
        let idx = CpuTensor::from_vec(idx_v.clone(), [idx_dims[1], idx_dims[0]], &cpu())
            .unwrap()
            .t()
            .unwrap();
        let idx_vals = read_layout(&idx_v, idx.layout());
        let got = x.gather(axis as isize, &idx).unwrap();
        assert_eq!(got.dims(), &idx_dims);
        let want: Vec<f64> = (0..n)
            .map(|p| {
                let mut index = unravel(p, &idx_dims);
                index[axis] = idx_vals[p] as usize;
                xv[ravel(&index, x.dims())]
            })
            .collect();
        assert_eq!(got.to_vec_f64().unwrap(), want, "axis {axis}");
    }
    let bad = CpuTensor::from_vec(vec![0i64, 5], [1, 2], &cpu()).unwrap();
    assert!(matches!(
        x.gather(1, &bad),
        Err(Error::IndexOutOfRange {
            op: "gather",
            index: 5,
            size: 5
        })
    ));
    // Large gather (parallel chunks) including an out-of-range index in a late chunk.
    let big_d = values(400 * 300, 84, -1.0, 1.0);
    let big = tensor_f32(&big_d, &[400, 300]);
    let mut idx_v: Vec<i64> = (0..400 * 200).map(|i| (i * 31 % 300) as i64).collect();
    let idx = CpuTensor::from_vec(idx_v.clone(), [400, 200], &cpu()).unwrap();
    let got = big.gather(1, &idx).unwrap().to_vec_f64().unwrap();
    let b32 = as_f32(&big_d);
    let want: Vec<f64> = (0..400 * 200)
        .map(|p| b32[(p / 200) * 300 + idx_v[p] as usize])
        .collect();
    assert_eq!(got, want);
    idx_v[70_000] = -3;
    let idx = CpuTensor::from_vec(idx_v, [400, 200], &cpu()).unwrap();
    assert!(matches!(
        big.gather(1, &idx),
        Err(Error::IndexOutOfRange { index: -3, .. })
    ));
}

#[test]
fn scatter_add_accumulates_duplicates() {
    let base_d = values(12, 85, -1.0, 1.0);
    let base = tensor_f64(&base_d, &[4, 3]).t().unwrap(); // [3, 4], strided
    let bv = view_of(&base_d, &base);
    let idx_v = vec![0i64, 3, 3, 1, 1, 1]; // [3, 2] along axis 1 (size 4)
    let src_d = values(6, 86, -1.0, 1.0);
    let idx = CpuTensor::from_vec(idx_v.clone(), [3, 2], &cpu()).unwrap();
    let src = tensor_f64(&src_d, &[2, 3]).t().unwrap(); // [3, 2], strided
    let sv = view_of(&src_d, &src);
    let got = base.scatter_add(1, &idx, &src).unwrap();
    let mut want = bv.clone();
    for p in 0..6 {
        let i = p / 2;
        want[i * 4 + idx_v[p] as usize] += sv[p];
    }
    assert_close(
        &got.to_vec_f64().unwrap(),
        &want,
        1e-15,
        1e-15,
        "scatter_add",
    );
    // Along axis 0, integers (wrapping), and errors.
    let bi = CpuTensor::from_vec(vec![i64::MAX, 0, 0, 0], [2, 2], &cpu()).unwrap();
    let ii = CpuTensor::from_vec(vec![0i64, 1], [1, 2], &cpu()).unwrap();
    let si = CpuTensor::from_vec(vec![1i64, 5], [1, 2], &cpu()).unwrap();
    assert_eq!(
        bi.scatter_add(0, &ii, &si)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![i64::MIN, 0, 0, 5]
    );
    let oob = CpuTensor::from_vec(vec![0i64, 2], [1, 2], &cpu()).unwrap();
    assert!(matches!(
        bi.scatter_add(0, &oob, &si),
        Err(Error::IndexOutOfRange {
            op: "scatter_add",
            index: 2,
            size: 2
        })
    ));
    let bools = CpuTensor::zeros([2, 2], DType::Bool, &cpu()).unwrap();
    let sb = CpuTensor::ones([1, 2], DType::Bool, &cpu()).unwrap();
    assert!(matches!(
        bools.scatter_add(0, &ii, &sb),
        Err(Error::UnsupportedDType { .. })
    ));
}
