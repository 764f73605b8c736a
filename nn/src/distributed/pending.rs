//! [`PendingCollective`]: an all-gather or reduce-scatter that was started and may still be
//! under way ([`crate::distributed::Communicator::start_all_gather`],
//! [`crate::distributed::Communicator::start_reduce_scatter`]).

use tessera_core::{Backend, Result, Tensor};

/// The handle of a collective started by
/// [`Communicator::start_all_gather`](crate::distributed::Communicator::start_all_gather) or
/// [`Communicator::start_reduce_scatter`](crate::distributed::Communicator::start_reduce_scatter):
/// [`PendingCollective::wait`] returns what the collective itself
/// ([`Communicator::all_gather`](crate::distributed::Communicator::all_gather),
/// [`Communicator::reduce_scatter`](crate::distributed::Communicator::reduce_scatter)) would
/// have returned. Dropping it without waiting waits for the exchange (the other ranks
/// take part in it, and a rank's later collectives come after it) and throws its result away.
pub struct PendingCollective<B: Backend> {
    /// `None` once waited for.
    finish: Option<Box<dyn FnOnce() -> Result<Tensor<B>> + Send>>,
}

impl<B: Backend> PendingCollective<B> {
    /// A collective that has already completed with `result` (what the provided
    /// `start_*` methods of [`Communicator`](crate::distributed::Communicator) return).
    pub fn ready(result: Tensor<B>) -> Self {
        PendingCollective {
            finish: Some(Box::new(move || Ok(result))),
        }
    }

    /// A collective under way that `finish` waits for (for implementations of the `start_*`
    /// methods of [`Communicator`](crate::distributed::Communicator)).
    pub fn new(finish: impl FnOnce() -> Result<Tensor<B>> + Send + 'static) -> Self {
        PendingCollective {
            finish: Some(Box::new(finish)),
        }
    }

    /// Waits for the collective and returns its result (an all-gather's every rank's shard
    /// concatenated in rank order, a reduce-scatter's share of this rank), or the error the
    /// exchange ended with.
    pub fn wait(mut self) -> Result<Tensor<B>> {
        match self.finish.take() {
            Some(finish) => finish(),
            None => unreachable!("a PendingCollective is waited for once: `wait` takes it"),
        }
    }
}

impl<B: Backend> Drop for PendingCollective<B> {
    fn drop(&mut self) {
        if let Some(finish) = self.finish.take() {
            // Dropped unused: the exchange still completes first; an error it ended with has
            // already broken the communicator, whose next call reports it.
            let _ = finish();
        }
    }
}

impl<B: Backend> std::fmt::Debug for PendingCollective<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingCollective")
    }
}
