//! Data loading: IDX files, MNIST-like data sets, the [`Dataset`] trait and the prefetching
//! [`DataLoader`]; for language models a [`TextCorpus`], a [`CharTokenizer`] and random
//! [`TokenWindows`] of a train/validation split.
//!
//! The pipeline is `MnistLike::load` (decode the IDX files) → [`MnistDataset`] (normalise pixels
//! to `f32`) → [`DataLoader`] (seeded shuffle, batching, background prefetch) → [`Batch`] →
//! [`Batch::to_tensors`] on any backend.

pub mod batch;
pub mod char_tokenizer;
pub mod dataset;
pub mod idx;
pub mod loader;
pub mod mnist;
pub mod mnist_dataset;
pub mod normalization;
pub mod shuffle;
pub mod subset;
pub mod text_corpus;
pub mod token_windows;

pub use batch::Batch;
pub use char_tokenizer::CharTokenizer;
pub use dataset::Dataset;
pub use idx::{find_idx_file, read_idx, IdxArray};
pub use loader::{DataLoader, EpochBatches, LoaderConfig};
pub use mnist::{MnistLike, Split, FASHION_MNIST_DIR, MISSING_DATA_HINT};
pub use mnist_dataset::MnistDataset;
pub use normalization::Normalization;
pub use shuffle::SplitMix64;
pub use subset::Subset;
pub use text_corpus::{TextCorpus, FORTUNES_DIR, FORTUNES_HINT};
pub use token_windows::TokenWindows;
