//! Layers: the building blocks models are assembled from. Each is a derived
//! [`crate::Module`] with PyTorch's semantics, parameter names, default hyper-parameters and
//! default initialisation, built from a config (`LinearConfig::new(784, 512).init(&dev, &mut g)?`).

mod activation;
mod batch_norm;
mod conv2d;
pub(crate) mod dropout;
mod embedding;
mod flatten;
mod kv_cache;
mod layer_norm;
mod linear;
mod multi_head_attention;
mod pooling;
mod rms_norm;
mod rotary;
mod sequential;
mod swiglu;
mod transformer_block;

pub use activation::{GeluApproximation, LeakyReLU, ReLU, SiLU, Sigmoid, Softmax, Tanh, GELU};
pub use batch_norm::{BatchNorm1d, BatchNorm2d, BatchNormConfig};
pub use conv2d::{Conv2d, Conv2dConfig};
pub use dropout::{Dropout, DropoutConfig};
pub use embedding::{Embedding, EmbeddingConfig};
pub use flatten::Flatten;
pub use kv_cache::KvCache;
pub use layer_norm::{LayerNorm, LayerNormConfig};
pub use linear::{Linear, LinearConfig};
pub use multi_head_attention::{MultiHeadAttention, MultiHeadAttentionConfig};
pub use pooling::{AvgPool2d, MaxPool2d, Pool2dConfig};
pub use rms_norm::{RmsNorm, RmsNormConfig};
pub use rotary::{RopeScaling, RotaryEmbedding};
pub use sequential::Sequential;
pub use swiglu::{SwiGlu, SwiGluConfig};
pub use transformer_block::{Mlp, TransformerBlock, TransformerBlockConfig};
