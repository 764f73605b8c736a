//! Writing into an existing tensor: the one mutating operation, for buffers that a program
//! fills step by step (a key/value cache), where a copy per step would cost more than the work.

use super::Tensor;
use crate::{Backend, Error, Result};

impl<B: Backend> Tensor<B> {
    /// Writes `src` into the region of `axis` starting at `start`, in place: `src` must match
    /// `self` off `axis`, and `self` must be contiguous and the only owner of its storage (no
    /// clone or view of it alive), otherwise an error says so and nothing changes. Use
    /// [`Tensor::narrow_assign`] for the copying version.
    ///
    /// ```
    /// # fn demo<B: tessera_core::Backend>(dev: &B) -> tessera_core::Result<()> {
    /// use tessera_core::{DType, Tensor};
    /// let mut cache = Tensor::zeros([4, 2], DType::F32, dev)?;
    /// cache.narrow_assign_in_place(0, 1, &Tensor::ones([2, 2], DType::F32, dev)?)?;
    /// assert_eq!(cache.to_vec::<f32>()?, [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0]);
    /// # Ok(()) }
    /// ```
    pub fn narrow_assign_in_place(&mut self, axis: isize, start: usize, src: &Self) -> Result<()> {
        const OP: &str = "narrow_assign_in_place";
        let a = self.shape().axis(OP, axis)?;
        self.check_same_device(OP, src)?;
        self.check_same_dtype(OP, src)?;
        if !self.is_contiguous() {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!("the destination {} must be contiguous", self.shape()),
            });
        }
        let len = src.dims().get(a).copied().unwrap_or(0);
        let region = self.layout.narrow(a as isize, start, len)?;
        if region.shape() != src.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: region.shape().clone(),
                rhs: src.shape().clone(),
            });
        }
        self.assign_into(&region, src, false)
    }
}
