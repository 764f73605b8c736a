//! Concatenation by writing each input into its region of a fresh output.

use crate::{Backend, Result, Tensor};

/// Joins `tensors` along `axis` (validated by [`Tensor::cat`]).
pub fn concat<B: Backend>(tensors: &[&Tensor<B>], axis: usize) -> Result<Tensor<B>> {
    let first = tensors[0];
    let mut dims = first.dims().to_vec();
    dims[axis] = tensors.iter().map(|t| t.dims()[axis]).sum();
    let mut out = Tensor::zeros(dims, first.dtype(), first.backend())?;
    let mut start = 0;
    for t in tensors {
        let len = t.dims()[axis];
        let region = out.layout().narrow(axis as isize, start, len)?;
        out.assign_into(&region, t, false)?;
        start += len;
    }
    Ok(out)
}
