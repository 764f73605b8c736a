//! Reference reductions: sum/prod/max/min over axis sets, arg-reductions, mean and variance.

use super::{elementwise::round_to, for_each_index, RefArray};
use tessera_core::{ArgReduceOp, DType, ReduceOp};

/// `shape` with every axis in `axes` set to 1 (`keepdim = true`) or removed (`keepdim = false`).
pub fn reduced_shape(shape: &[usize], axes: &[usize], keepdim: bool) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keepdim) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Calls `f` for every output index (the kept shape) with the list of input elements that
/// reduce into it, in row-major order of the reduced axes.
fn for_each_group(x: &RefArray, axes: &[usize], mut f: impl FnMut(&[usize], Vec<f64>)) {
    let out_shape = reduced_shape(&x.shape, axes, true);
    let inner: Vec<usize> = axes.iter().map(|&a| x.shape[a]).collect();
    for_each_index(&out_shape, |out| {
        let mut group = Vec::new();
        for_each_index(&inner, |r| {
            let mut src = out.to_vec();
            for (k, &a) in axes.iter().enumerate() {
                src[a] = r[k];
            }
            group.push(x.at(&src));
        });
        f(out, group);
    });
}

/// Reduces one group of values the way `op` does on `dtype`.
pub fn reduce_values(op: ReduceOp, dtype: DType, values: &[f64]) -> f64 {
    if dtype == DType::I64 {
        let ints = values.iter().map(|&v| v as i64);
        let r = match op {
            ReduceOp::Sum => ints.fold(0i64, i64::wrapping_add),
            ReduceOp::Prod => ints.fold(1i64, i64::wrapping_mul),
            ReduceOp::Max => ints.max().expect("max of an empty group"),
            ReduceOp::Min => ints.min().expect("min of an empty group"),
        };
        return r as f64;
    }
    let r = match op {
        ReduceOp::Sum => values.iter().sum(),
        ReduceOp::Prod => values.iter().product(),
        ReduceOp::Max | ReduceOp::Min => {
            assert!(!values.is_empty(), "max/min of an empty group");
            if values.iter().any(|v| v.is_nan()) {
                f64::NAN
            } else if op == ReduceOp::Max {
                values.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
            } else {
                values.iter().cloned().fold(f64::INFINITY, f64::min)
            }
        }
    };
    round_to(dtype, r)
}

/// `op` over `axes` (sorted, distinct); the result keeps the reduced axes as size 1.
pub fn reduce(op: ReduceOp, dtype: DType, x: &RefArray, axes: &[usize]) -> RefArray {
    let mut out = RefArray::full(reduced_shape(&x.shape, axes, true), 0.0);
    for_each_group(x, axes, |idx, group| {
        *out.at_mut(idx) = reduce_values(op, dtype, &group);
    });
    out
}

/// Index of the first extremum along `axis` (a NaN beats every number; the first NaN wins),
/// keeping `axis` as size 1.
pub fn arg_reduce(op: ArgReduceOp, x: &RefArray, axis: usize) -> RefArray {
    let mut out = RefArray::full(reduced_shape(&x.shape, &[axis], true), 0.0);
    for_each_group(x, &[axis], |idx, group| {
        let mut best = 0usize;
        for (k, &v) in group.iter().enumerate().skip(1) {
            let b = group[best];
            let better = if b.is_nan() {
                false
            } else if v.is_nan() {
                true
            } else {
                match op {
                    ArgReduceOp::ArgMax => v > b,
                    ArgReduceOp::ArgMin => v < b,
                }
            };
            if better {
                best = k;
            }
        }
        *out.at_mut(idx) = best as f64;
    });
    out
}

/// Number of elements reduced into each output element.
pub fn group_len(shape: &[usize], axes: &[usize]) -> usize {
    axes.iter().map(|&a| shape[a]).product()
}

/// Mean over `axes`, kept as size 1 (NaN for an empty group), rounded to `dtype`.
pub fn mean(dtype: DType, x: &RefArray, axes: &[usize]) -> RefArray {
    let mut out = RefArray::full(reduced_shape(&x.shape, axes, true), 0.0);
    for_each_group(x, axes, |idx, group| {
        let m = group.iter().sum::<f64>() / group.len() as f64;
        *out.at_mut(idx) = round_to(dtype, m);
    });
    out
}

/// Variance over `axes` with `correction` subtracted from the count, kept as size 1.
pub fn var(dtype: DType, x: &RefArray, axes: &[usize], correction: usize) -> RefArray {
    let mut out = RefArray::full(reduced_shape(&x.shape, axes, true), 0.0);
    for_each_group(x, axes, |idx, group| {
        let n = group.len();
        let m = group.iter().sum::<f64>() / n as f64;
        let ss: f64 = group.iter().map(|v| (v - m) * (v - m)).sum();
        *out.at_mut(idx) = round_to(dtype, ss / n.saturating_sub(correction) as f64);
    });
    out
}

/// An error magnitude for [`var`]: `sum((|x| + |mean|)^2) / denominator`, which bounds what
/// rounding in the centring and squaring can move the result by (relative to machine epsilon).
pub fn var_magnitude(x: &RefArray, axes: &[usize], correction: usize) -> RefArray {
    let mut out = RefArray::full(reduced_shape(&x.shape, axes, true), 0.0);
    for_each_group(x, axes, |idx, group| {
        let n = group.len();
        let m = (group.iter().sum::<f64>() / n as f64).abs();
        let ss: f64 = group.iter().map(|v| (v.abs() + m).powi(2)).sum();
        *out.at_mut(idx) = ss / n.saturating_sub(correction).max(1) as f64;
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let a = RefArray::new(vec![2, 3], vec![1.0, 5.0, 5.0, f64::NAN, 2.0, f64::NAN]);
        let s = reduce(ReduceOp::Sum, DType::F64, &a, &[0]);
        assert_eq!(s.shape, vec![1, 3]);
        assert!(s.data[0].is_nan());
        assert_eq!(s.data[1], 7.0);
        assert_eq!(arg_reduce(ArgReduceOp::ArgMax, &a, 1).data, vec![1.0, 0.0]);
        assert_eq!(arg_reduce(ArgReduceOp::ArgMin, &a, 1).data, vec![0.0, 0.0]);
        let e = RefArray::new(vec![2, 0], vec![]);
        assert_eq!(
            reduce(ReduceOp::Prod, DType::F32, &e, &[1]).data,
            vec![1.0, 1.0]
        );
        let v = RefArray::new(vec![4], vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(var(DType::F64, &v, &[0], 1).data, vec![5.0 / 3.0]);
    }
}
