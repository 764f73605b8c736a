//! [`MnistDataset`]: an [`MnistLike`] split as a [`Dataset`] of normalised `f32` images.

use crate::data::dataset::{check_indices, Dataset};
use crate::data::mnist::MnistLike;
use crate::data::normalization::Normalization;
use crate::Result;
use std::sync::Arc;

/// MNIST-like images as normalised `f32` features of dims `[1, rows, cols]` (channels first,
/// ready for a convolution) or `[rows * cols]` (see [`MnistDataset::flattened`]), with the class
/// as an `i64` label.
#[derive(Clone, Debug)]
pub struct MnistDataset {
    data: Arc<MnistLike>,
    normalization: Normalization,
    lookup: [f32; 256],
    item_dims: Vec<usize>,
}

impl MnistDataset {
    /// Wraps `data`, normalising each pixel with `normalization`.
    pub fn new(data: impl Into<Arc<MnistLike>>, normalization: Normalization) -> Self {
        let data = data.into();
        let item_dims = vec![1, data.rows(), data.cols()];
        MnistDataset {
            data,
            normalization,
            lookup: normalization.lookup_table(),
            item_dims,
        }
    }

    /// The same data with features of dims `[rows * cols]` (for fully connected models).
    pub fn flattened(mut self) -> Self {
        self.item_dims = vec![self.data.pixels_per_image()];
        self
    }

    /// The underlying raw data.
    pub fn raw(&self) -> &MnistLike {
        &self.data
    }

    /// The normalisation applied to the pixels.
    pub fn normalization(&self) -> Normalization {
        self.normalization
    }
}

impl Dataset for MnistDataset {
    fn len(&self) -> usize {
        self.data.len()
    }

    fn item_dims(&self) -> &[usize] {
        &self.item_dims
    }

    fn fill_batch(
        &self,
        indices: &[usize],
        features: &mut Vec<f32>,
        labels: &mut Vec<i64>,
    ) -> Result<()> {
        check_indices("MnistDataset::fill_batch", indices, self.len())?;
        let pixels = self.data.pixels_per_image();
        let images = self.data.images();
        let all_labels = self.data.labels();
        features.reserve(indices.len() * pixels);
        labels.reserve(indices.len());
        for &i in indices {
            let image = &images[i * pixels..(i + 1) * pixels];
            features.extend(image.iter().map(|&b| self.lookup[usize::from(b)]));
            labels.push(i64::from(all_labels[i]));
        }
        Ok(())
    }
}
