//! [`LocalShards`]: the part of an optimizer's parameters and state that one rank owns, what
//! each rank writes into a sharded checkpoint
//! ([`crate::run::save_sharded_checkpoint`]).

use tessera_core::{Backend, Tensor};

/// Elements `[offset, offset + values.numel())` of the row-major flattened tensor `name` of
/// shape `dims`.
#[derive(Clone, Debug)]
pub struct TensorPiece<B: Backend> {
    /// The whole tensor's name (a parameter's, or an optimizer state key `"<param>.<entry>"`).
    pub name: String,
    /// The whole tensor's dims.
    pub dims: Vec<usize>,
    /// Where the piece starts in the flattened tensor.
    pub offset: usize,
    /// The piece: a contiguous rank-1 tensor.
    pub values: Tensor<B>,
}

/// What one rank of an optimizer whose state is spread over the ranks owns
/// ([`crate::optim::Optimizer::local_shards`]). Together, the ranks' pieces cover every
/// element of every parameter and state tensor exactly once.
#[derive(Clone, Debug)]
pub struct LocalShards<B: Backend> {
    /// The names of every parameter the optimizer covers, on every rank (a covered parameter
    /// is saved as the ranks' pieces, never whole).
    pub covered: Vec<String>,
    /// This rank's pieces of the parameters' values.
    pub parameters: Vec<TensorPiece<B>>,
    /// This rank's pieces of the optimizer state (keys as [`crate::optim::Optimizer::state`]
    /// names them when consolidated).
    pub state: Vec<TensorPiece<B>>,
    /// State entries every rank holds whole and equal (e.g. step counts), by key.
    pub replicated_state: Vec<(String, Tensor<B>)>,
}
