//! PyTorch-like printing: `tensor([[1.0000, 2.0000], [3.0000, 4.0000]], dtype=f32, device=cpu:0)`,
//! summarised with `...` past 1000 elements (three items kept at each end of every axis).

use super::Tensor;
use crate::{Backend, DType};
use std::fmt;

const SUMMARY_THRESHOLD: usize = 1000;
const EDGE_ITEMS: usize = 3;

impl<B: Backend> fmt::Display for Tensor<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = match self.to_vec_f64() {
            Ok(v) => v,
            Err(e) => return write!(f, "tensor(<unreadable: {e}>)"),
        };
        // An empty tensor prints one `[]` per position of its leading dims, which may be huge
        // ([1 << 31, 0]): summarise by the extent (size-0 dims counted as 1), not the count.
        let extent = self
            .dims()
            .iter()
            .fold(1usize, |acc, &d| acc.saturating_mul(d.max(1)));
        let summarise = values.len() > SUMMARY_THRESHOLD || extent > SUMMARY_THRESHOLD;
        let strides = self.shape().contiguous_strides();
        let mut out = String::from("tensor(");
        write_axis(
            &mut out,
            &values,
            self.dims(),
            &strides,
            0,
            0,
            self.dtype(),
            summarise,
        );
        write!(
            f,
            "{out}, dtype={}, device={})",
            self.dtype(),
            self.backend().device()
        )
    }
}

impl<B: Backend> fmt::Debug for Tensor<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor {{ shape: {}, dtype: {}, device: {}, layout: {:?} }}",
            self.shape(),
            self.dtype(),
            self.backend().device(),
            self.layout()
        )
    }
}

fn format_value(x: f64, dtype: DType) -> String {
    match dtype {
        DType::Bool => (if x != 0.0 { "true" } else { "false" }).to_string(),
        DType::I64 => format!("{}", x as i64),
        _ if x.is_nan() => "nan".into(),
        _ if x.is_infinite() => (if x > 0.0 { "inf" } else { "-inf" }).into(),
        _ if x != 0.0 && (x.abs() >= 1e8 || x.abs() < 1e-4) => format!("{x:.4e}"),
        _ => format!("{x:.4}"),
    }
}

#[allow(clippy::too_many_arguments)]
fn write_axis(
    out: &mut String,
    values: &[f64],
    dims: &[usize],
    strides: &[isize],
    axis: usize,
    base: usize,
    dtype: DType,
    summarise: bool,
) {
    if dims.is_empty() {
        out.push_str(&format_value(values[0], dtype));
        return;
    }
    out.push('[');
    let n = dims[axis];
    let indices: Vec<Option<usize>> = if summarise && n > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((n - EDGE_ITEMS..n).map(Some))
            .collect()
    } else {
        (0..n).map(Some).collect()
    };
    let last_axis = axis + 1 == dims.len();
    for (pos, index) in indices.iter().enumerate() {
        if pos > 0 {
            out.push(',');
            if last_axis {
                out.push(' ');
            } else {
                out.push('\n');
                out.push_str(&" ".repeat(axis + 8));
            }
        }
        match index {
            None => out.push_str("..."),
            Some(i) => {
                let at = base + i * strides[axis] as usize;
                if last_axis {
                    out.push_str(&format_value(values[at], dtype));
                } else {
                    write_axis(out, values, dims, strides, axis + 1, at, dtype, summarise);
                }
            }
        }
    }
    out.push(']');
}
