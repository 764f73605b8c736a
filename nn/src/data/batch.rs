//! [`Batch`]: a host-side mini-batch of features and labels, ready to upload to a device.

use crate::data::dataset::Dataset;
use crate::Result;
use tessera_core::{Backend, Tensor};

/// A mini-batch on the host: `len()` items' features (row-major, dims `feature_dims`), their
/// labels and the data-set indices they came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    /// The features of every item, row-major with dims `feature_dims`.
    pub features: Vec<f32>,
    /// `[batch_len, ..item_dims]`.
    pub feature_dims: Vec<usize>,
    /// One class label per item.
    pub labels: Vec<i64>,
    /// The data-set index of each item.
    pub indices: Vec<usize>,
}

impl Batch {
    /// Reads the items `indices` of `dataset` into a new batch.
    pub fn from_dataset<D: Dataset + ?Sized>(dataset: &D, indices: &[usize]) -> Result<Self> {
        let mut features = Vec::with_capacity(indices.len() * dataset.item_numel());
        let mut labels = Vec::with_capacity(indices.len());
        dataset.fill_batch(indices, &mut features, &mut labels)?;
        let mut feature_dims = Vec::with_capacity(1 + dataset.item_dims().len());
        feature_dims.push(indices.len());
        feature_dims.extend_from_slice(dataset.item_dims());
        Ok(Batch {
            features,
            feature_dims,
            labels,
            indices: indices.to_vec(),
        })
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when the batch holds no item.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Uploads the batch: an `F32` features tensor of dims `feature_dims` and an `I64` labels
    /// tensor of dims `[len]`.
    pub fn to_tensors<B: Backend>(&self, backend: &B) -> Result<(Tensor<B>, Tensor<B>)> {
        let features = Tensor::from_slice(&self.features, self.feature_dims.clone(), backend)?;
        let labels = Tensor::from_slice(&self.labels, [self.labels.len()], backend)?;
        Ok((features, labels))
    }

    /// Like [`Batch::to_tensors`], consuming the batch to avoid copying its buffers on the host.
    pub fn into_tensors<B: Backend>(self, backend: &B) -> Result<(Tensor<B>, Tensor<B>)> {
        let n = self.labels.len();
        let features = Tensor::from_vec(self.features, self.feature_dims, backend)?;
        let labels = Tensor::from_vec(self.labels, [n], backend)?;
        Ok((features, labels))
    }
}
