//! The [`Dataset`] trait: indexed items of `f32` features and an `i64` class label, read in
//! batches.

use crate::{Error, Result};

/// A finite, indexable collection of `(features, label)` items, all with the same feature dims.
///
/// The batch-oriented [`Dataset::fill_batch`] is the primitive (one virtual call per batch, no
/// per-item allocation); [`Dataset::get`] is built on it. Data sets are `Send + Sync` so that the
/// [`crate::data::DataLoader`] can read them from its prefetch thread.
pub trait Dataset: Send + Sync {
    /// Number of items.
    fn len(&self) -> usize;

    /// True when there is no item.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dims of one item's features, e.g. `[1, 28, 28]`; a batch of `n` items has features of
    /// dims `[n, ..item_dims]`.
    fn item_dims(&self) -> &[usize];

    /// Number of `f32` features of one item (the product of [`Dataset::item_dims`]).
    fn item_numel(&self) -> usize {
        self.item_dims().iter().product()
    }

    /// Appends the features of the items `indices` (in that order, row-major, `item_numel()` each)
    /// to `features` and their labels to `labels`. An index `>= len()` is an
    /// [`Error::InvalidArgument`], and then nothing is appended.
    fn fill_batch(
        &self,
        indices: &[usize],
        features: &mut Vec<f32>,
        labels: &mut Vec<i64>,
    ) -> Result<()>;

    /// The features and label of item `index`.
    fn get(&self, index: usize) -> Result<(Vec<f32>, i64)> {
        let mut features = Vec::with_capacity(self.item_numel());
        let mut labels = Vec::with_capacity(1);
        self.fill_batch(&[index], &mut features, &mut labels)?;
        let label = labels.pop().ok_or_else(|| Error::InvalidArgument {
            op: "Dataset::get",
            msg: format!("fill_batch returned no label for index {index}"),
        })?;
        Ok((features, label))
    }
}

/// Checks that every index is below `len`, naming the first one that is not.
pub fn check_indices(op: &'static str, indices: &[usize], len: usize) -> Result<()> {
    match indices.iter().find(|&&i| i >= len) {
        Some(&bad) => Err(Error::InvalidArgument {
            op,
            msg: format!("index {bad} is out of range for a data set of {len} items"),
        }),
        None => Ok(()),
    }
}
