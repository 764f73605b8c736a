//! Layers: the building blocks models are assembled from. Each implements
//! [`crate::module::Module`] with PyTorch's semantics, default hyper-parameters, default
//! initialisation and parameter names.

mod activation;
mod batch_norm;
mod conv2d;
mod dropout;
mod embedding;
mod flatten;
mod layer_norm;
mod linear;
mod pooling;
mod sequential;

pub use activation::{LeakyReLU, ReLU, Sigmoid, Softmax, Tanh, GELU};
pub use batch_norm::{BatchNorm1d, BatchNorm2d, BatchNormConfig};
pub use conv2d::{Conv2d, Conv2dConfig};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use flatten::Flatten;
pub use layer_norm::LayerNorm;
pub use linear::Linear;
pub use pooling::{AvgPool2d, MaxPool2d};
pub use sequential::Sequential;
