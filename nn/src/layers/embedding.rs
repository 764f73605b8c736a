//! [`Embedding`]: a lookup table of learned vectors.

use crate::init;
use crate::module::{child_name, Module, TrainingMode};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Generator, Result, Tensor};

/// A table of `num_embeddings` vectors of length `embedding_dim` (PyTorch's `nn.Embedding`):
/// the input is an `i64` tensor of indices of any shape, the output has that shape followed by
/// `embedding_dim`. An index outside `0..num_embeddings` is an error.
///
/// Default initialisation (PyTorch's): `W ~ N(0, 1)`. Parameter: `weight`.
pub struct Embedding<B: Backend> {
    weight: Var<B>,
    mode: TrainingMode,
}

impl<B: Backend> Embedding<B> {
    /// A table with weights drawn from `N(0, 1)` with `generator`.
    pub fn new(
        num_embeddings: usize,
        embedding_dim: usize,
        dtype: DType,
        generator: &mut Generator,
        backend: &B,
    ) -> Result<Self> {
        let weight = init::normal(
            [num_embeddings, embedding_dim],
            0.0,
            1.0,
            dtype,
            generator,
            backend,
        )?;
        Self::from_tensor(weight)
    }

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

    /// Looks up a tensor of `i64` indices (convenience for [`Module::forward`]).
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

impl<B: Backend> Module<B> for Embedding<B> {
    /// `x` holds `i64` indices; it is not differentiated.
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        self.lookup(&x.value())
    }

    fn visit_parameters(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>)) {
        f(&child_name(prefix, "weight"), &self.weight);
    }

    fn set_training(&self, training: bool) {
        self.mode.set(training);
    }

    fn is_training(&self) -> bool {
        self.mode.get()
    }
}
