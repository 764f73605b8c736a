//! [`Subset`]: some items of a data set, re-indexed from 0 (PyTorch's `Subset`).

use crate::data::dataset::{check_indices, Dataset};
use crate::Result;
use std::sync::Arc;

/// The items `indices` of a data set, seen as a data set of `indices.len()` items: item `i` is
/// item `indices[i]` of the inner one. Used e.g. to give each rank its share of a test set.
#[derive(Debug)]
pub struct Subset<D: Dataset> {
    dataset: Arc<D>,
    indices: Vec<usize>,
}

impl<D: Dataset> Subset<D> {
    /// The items `indices` of `dataset`; fails naming the first index `>= dataset.len()`.
    pub fn new(dataset: impl Into<Arc<D>>, indices: Vec<usize>) -> Result<Self> {
        let dataset = dataset.into();
        check_indices("Subset::new", &indices, dataset.len())?;
        Ok(Subset { dataset, indices })
    }

    /// The inner data set's index of each item.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }
}

impl<D: Dataset> Dataset for Subset<D> {
    fn len(&self) -> usize {
        self.indices.len()
    }

    fn item_dims(&self) -> &[usize] {
        self.dataset.item_dims()
    }

    fn fill_batch(
        &self,
        indices: &[usize],
        features: &mut Vec<f32>,
        labels: &mut Vec<i64>,
    ) -> Result<()> {
        check_indices("Subset::fill_batch", indices, self.indices.len())?;
        let inner: Vec<usize> = indices.iter().map(|&i| self.indices[i]).collect();
        self.dataset.fill_batch(&inner, features, labels)
    }
}
