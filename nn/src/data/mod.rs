//! Data loading: IDX files, MNIST-like data sets, the [`Dataset`] trait and the prefetching
//! [`DataLoader`].
//!
//! The pipeline is `MnistLike::load` (decode the IDX files) → [`MnistDataset`] (normalise pixels
//! to `f32`) → [`DataLoader`] (seeded shuffle, batching, background prefetch) → [`Batch`] →
//! [`Batch::to_tensors`] on any backend.

pub mod batch;
pub mod dataset;
pub mod idx;
pub mod loader;
pub mod mnist;
pub mod mnist_dataset;
pub mod normalization;
pub mod shuffle;
pub mod subset;

pub use batch::Batch;
pub use dataset::Dataset;
pub use idx::{find_idx_file, read_idx, IdxArray};
pub use loader::{DataLoader, EpochBatches, LoaderConfig};
pub use mnist::{MnistLike, Split, FASHION_MNIST_DIR, MISSING_DATA_HINT};
pub use mnist_dataset::MnistDataset;
pub use normalization::Normalization;
pub use shuffle::SplitMix64;
pub use subset::Subset;
