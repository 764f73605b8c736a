//! [`Embedding`]: a lookup table of learned vectors.

use crate::init;
use crate::module::{Forward, TrainingMode};
use crate::{Config, Module};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Generator, Result, Tensor};

/// The hyper-parameters of an [`Embedding`] (PyTorch's `nn.Embedding` arguments).
#[derive(Config, Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddingConfig {
    /// The number of vectors in the table (the vocabulary size).
    pub num_embeddings: usize,
    /// The length of each vector.
    pub embedding_dim: usize,
    /// The dtype of the table.
    #[config(default = DType::F32)]
    pub dtype: DType,
}

impl EmbeddingConfig {
    /// A table with PyTorch's default initialisation, `W ~ N(0, 1)`, drawn from `generator`.
    pub fn init<B: Backend>(&self, backend: &B, generator: &mut Generator) -> Result<Embedding<B>> {
        let weight = init::normal(
            [self.num_embeddings, self.embedding_dim],
            0.0,
            1.0,
            self.dtype,
            generator,
            backend,
        )?;
        Embedding::from_tensor(weight)
    }
}

/// A table of `num_embeddings` vectors of length `embedding_dim` (PyTorch's `nn.Embedding`):
/// the input is an `i64` tensor of indices of any shape, the output has that shape followed by
/// `embedding_dim`. An index outside `0..num_embeddings` is an error.
///
/// Default initialisation (PyTorch's): `W ~ N(0, 1)`. Parameter: `weight`.
#[derive(Module)]
pub struct Embedding<B: Backend> {
    weight: Var<B>,
    mode: TrainingMode,
}

impl<B: Backend> Embedding<B> {
    /// A table with the given `weight: [num_embeddings, embedding_dim]`.
    pub fn from_tensor(weight: Tensor<B>) -> Result<Self> {
        if weight.rank() != 2 {
            return Err(Error::InvalidArgument {
                op: "Embedding",
                msg: format!(
                    "weight must be [num_embeddings, embedding_dim], got shape {}",
                    weight.shape()
                ),
            });
        }
        Ok(Embedding {
            weight: Var::param(weight),
            mode: TrainingMode::new(),
        })
    }

    /// The table `[num_embeddings, embedding_dim]`.
    pub fn weight(&self) -> &Var<B> {
        &self.weight
    }

    /// Looks up a tensor of `i64` indices (what [`Forward::forward`] does with the indices of its input).
    pub fn lookup(&self, indices: &Tensor<B>) -> Result<Var<B>> {
        if indices.dtype() != DType::I64 {
            return Err(Error::DTypeMismatch {
                op: "Embedding",
                lhs: indices.dtype(),
                rhs: DType::I64,
            });
        }
        let flat = indices.reshape([indices.numel()])?;
        let rows = self.weight.index_select(0, &flat)?;
        let mut out_dims = indices.dims().to_vec();
        out_dims.push(self.weight.dims()[1]);
        rows.reshape(out_dims)
    }
}

impl<B: Backend> Forward<B> for Embedding<B> {
    /// `x` holds `i64` indices; it is not differentiated.
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        self.lookup(&x.value())
    }
}
