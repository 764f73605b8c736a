//! Reference softmax, log-softmax and log-sum-exp along one axis.

use super::{elementwise::round_to, for_each_index, reduce::reduced_shape, RefArray};
use tessera_core::DType;

/// Applies `f(row) -> row` to every 1-d slice along `axis`.
fn map_rows(x: &RefArray, axis: usize, f: impl Fn(&[f64]) -> Vec<f64>) -> RefArray {
    let mut out = RefArray::full(x.shape.clone(), 0.0);
    let outer = reduced_shape(&x.shape, &[axis], true);
    for_each_index(&outer, |base| {
        let mut idx = base.to_vec();
        let row: Vec<f64> = (0..x.shape[axis])
            .map(|k| {
                idx[axis] = k;
                x.at(&idx)
            })
            .collect();
        for (k, v) in f(&row).into_iter().enumerate() {
            idx[axis] = k;
            *out.at_mut(&idx) = v;
        }
    });
    out
}

/// `log(sum(exp(row)))`: `-inf` for an all `-inf` row, NaN when a NaN is present.
fn lse(row: &[f64]) -> f64 {
    if row.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
}

/// `exp(x_i) / sum_j exp(x_j)` along `axis` (a row of only `-inf` is 0/0 = NaN).
pub fn softmax(dtype: DType, x: &RefArray, axis: usize) -> RefArray {
    map_rows(x, axis, |row| {
        let l = lse(row);
        row.iter()
            .map(|&v| {
                if l == f64::NEG_INFINITY {
                    f64::NAN
                } else {
                    round_to(dtype, (v - l).exp())
                }
            })
            .collect()
    })
}

/// `x_i - log(sum_j exp(x_j))` along `axis`.
pub fn log_softmax(dtype: DType, x: &RefArray, axis: usize) -> RefArray {
    map_rows(x, axis, |row| {
        let l = lse(row);
        row.iter().map(|&v| round_to(dtype, v - l)).collect()
    })
}

/// `log(sum(exp(x)))` along `axis`, kept as size 1.
pub fn logsumexp(dtype: DType, x: &RefArray, axis: usize) -> RefArray {
    let mut out = RefArray::full(reduced_shape(&x.shape, &[axis], true), 0.0);
    let outer = out.shape.clone();
    for_each_index(&outer, |base| {
        let mut idx = base.to_vec();
        let row: Vec<f64> = (0..x.shape[axis])
            .map(|k| {
                idx[axis] = k;
                x.at(&idx)
            })
            .collect();
        *out.at_mut(base) = round_to(dtype, lse(&row));
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let x = RefArray::new(vec![2, 2], vec![0.0, 0.0, f64::NEG_INFINITY, 1.0]);
        assert_eq!(softmax(DType::F64, &x, 1).data, vec![0.5, 0.5, 0.0, 1.0]);
        let l = logsumexp(DType::F64, &x, 1);
        assert_eq!(l.shape, vec![2, 1]);
        assert!((l.data[0] - 2f64.ln()).abs() < 1e-15);
        assert_eq!(l.data[1], 1.0);
    }
}
