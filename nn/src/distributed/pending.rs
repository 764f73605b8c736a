//! [`PendingGather`]: an all-gather that was started and may still be under way
//! ([`crate::distributed::Communicator::start_all_gather`]).

use tessera_core::{Backend, Result, Tensor};

/// The handle of an all-gather started by
/// [`Communicator::start_all_gather`](crate::distributed::Communicator::start_all_gather):
/// [`PendingGather::wait`] returns what [`Communicator::all_gather`](crate::distributed::Communicator::all_gather)
/// would have returned. Dropping it without waiting waits for the exchange (the other ranks
/// take part in it, and a rank's later collectives come after it) and throws its result away.
pub struct PendingGather<B: Backend> {
    /// `None` once waited for.
    finish: Option<Box<dyn FnOnce() -> Result<Tensor<B>> + Send>>,
}

impl<B: Backend> PendingGather<B> {
    /// A gather that has already completed with `gathered` (what the provided
    /// [`Communicator::start_all_gather`](crate::distributed::Communicator::start_all_gather)
    /// returns).
    pub fn ready(gathered: Tensor<B>) -> Self {
        PendingGather {
            finish: Some(Box::new(move || Ok(gathered))),
        }
    }

    /// A gather under way that `finish` waits for (for implementations of
    /// [`Communicator::start_all_gather`](crate::distributed::Communicator::start_all_gather)).
    pub fn new(finish: impl FnOnce() -> Result<Tensor<B>> + Send + 'static) -> Self {
        PendingGather {
            finish: Some(Box::new(finish)),
        }
    }

    /// Waits for the gather and returns every rank's shard concatenated in rank order, or the
    /// error the exchange ended with.
    pub fn wait(mut self) -> Result<Tensor<B>> {
        match self.finish.take() {
            Some(finish) => finish(),
            None => unreachable!("a PendingGather is waited for once: `wait` takes it"),
        }
    }
}

impl<B: Backend> Drop for PendingGather<B> {
    fn drop(&mut self) {
        if let Some(finish) = self.finish.take() {
            // Dropped unused: the exchange still completes first; an error it ended with has
            // already broken the communicator, whose next call reports it.
            let _ = finish();
        }
    }
}

impl<B: Backend> std::fmt::Debug for PendingGather<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingGather")
    }
}
