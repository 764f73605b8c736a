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

/// `log(sum(exp(row)))` as PyTorch defines it: NaN when a NaN is present, `+inf` when a `+inf`
/// is, `-inf` for an empty row or a row of `-inf`.
fn lse(row: &[f64]) -> f64 {
    if row.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if m.is_infinite() {
        return m;
    }
    m + log_sum_shifted(row, m)
}

/// `ln(sum(exp(v - m)))` for the finite row maximum `m`.
fn log_sum_shifted(row: &[f64], m: f64) -> f64 {
    row.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
}

/// The finite maximum of a row that softmax and log-softmax are defined on, or `None` when
/// PyTorch's result is NaN for the whole row: a NaN, a `+inf`, or nothing but `-inf`.
fn finite_max(row: &[f64]) -> Option<f64> {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (m.is_finite() && !row.iter().any(|v| v.is_nan())).then_some(m)
}

/// `exp(x_i - m) / sum_j exp(x_j - m)` along `axis` (`m` the row maximum); a row holding NaN or
/// `+inf`, or only `-inf`, is NaN throughout, as in PyTorch.
pub fn softmax(dtype: DType, x: &RefArray, axis: usize) -> RefArray {
    map_rows(x, axis, |row| match finite_max(row) {
        None => vec![f64::NAN; row.len()],
        Some(m) => {
            let l = log_sum_shifted(row, m);
            row.iter()
                .map(|&v| round_to(dtype, (v - m - l).exp()))
                .collect()
        }
    })
}

/// `(x_i - m) - log(sum_j exp(x_j - m))` along `axis`; NaN rows as [`softmax`].
pub fn log_softmax(dtype: DType, x: &RefArray, axis: usize) -> RefArray {
    map_rows(x, axis, |row| match finite_max(row) {
        None => vec![f64::NAN; row.len()],
        Some(m) => {
            let l = log_sum_shifted(row, m);
            row.iter().map(|&v| round_to(dtype, (v - m) - l)).collect()
        }
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
        // PyTorch's special rows.
        let inf = f64::INFINITY;
        let x = RefArray::new(vec![3, 2], vec![1.0, inf, -inf, -inf, f64::NAN, 0.0]);
        assert!(softmax(DType::F64, &x, 1).data.iter().all(|v| v.is_nan()));
        assert!(log_softmax(DType::F64, &x, 1)
            .data
            .iter()
            .all(|v| v.is_nan()));
        assert_eq!(logsumexp(DType::F64, &x, 1).data[..2], [inf, -inf]);
        assert!(logsumexp(DType::F64, &x, 1).data[2].is_nan());
        let x = RefArray::new(vec![2], vec![-inf, 1.0]);
        assert_eq!(log_softmax(DType::F64, &x, 0).data, vec![-inf, 0.0]);
    }
}
