//! [`LocalCommunicator`]: a group of one rank, so that code written for data-parallel training
//! runs (and is tested) in a single process unchanged.

use crate::distributed::communicator::{check_reducible, check_root, Communicator, Reduction};
use tessera_core::{Backend, Result, Tensor};

/// The group of this process alone (rank 0 of 1): every collective returns its input, after
/// the same argument checks as the multi-process communicators.
///
/// ```
/// use tessera_nn::distributed::{Communicator, LocalCommunicator, Reduction};
/// use tessera_core::Tensor;
/// # fn main() -> tessera_core::Result<()> {
/// let dev = tessera_cpu::Cpu::new();
/// let comm = LocalCommunicator::new();
/// let mut t = Tensor::from_vec(vec![1.0f32, 2.0], [2], &dev)?;
/// Communicator::<tessera_cpu::Cpu>::all_reduce(&comm, &mut t, Reduction::Mean)?;
/// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 2.0]);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalCommunicator;

impl LocalCommunicator {
    /// The one-rank group.
    pub fn new() -> Self {
        LocalCommunicator
    }
}

impl<B: Backend> Communicator<B> for LocalCommunicator {
    fn rank(&self) -> usize {
        0
    }

    fn world_size(&self) -> usize {
        1
    }

    fn library(&self) -> &'static str {
        "local"
    }

    fn all_reduce(&self, tensor: &mut Tensor<B>, op: Reduction) -> Result<()> {
        check_reducible(tensor.dtype(), op)
    }

    fn broadcast(&self, _tensor: &mut Tensor<B>, root: usize) -> Result<()> {
        check_root("broadcast", root, 1)
    }

    fn barrier(&self) -> Result<()> {
        Ok(())
    }

    fn all_reduce_host(&self, _values: &mut [f64], _op: Reduction) -> Result<()> {
        Ok(())
    }
}
