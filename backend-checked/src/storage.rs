//! The storage of a [`crate::Checked`] backend: one buffer on each backend, holding the same
//! values.

use std::fmt;
use std::sync::Arc;
use tessera_core::{Backend, BackendStorage, DType};

/// A buffer on the backend under test and its mirror on the reference backend.
///
/// After every op the mirror is overwritten with the values the backend under test produced, so
/// the reference always computes on exactly the inputs the backend under test saw: a divergence
/// is the fault of the op that reports it, never an accumulation of earlier rounding.
pub struct CheckedStorage<B: Backend, R: Backend> {
    pub(crate) under_test: Arc<B::Storage>,
    pub(crate) reference: Arc<R::Storage>,
}

impl<B: Backend, R: Backend> CheckedStorage<B, R> {
    /// The buffer on the backend under test.
    pub fn under_test(&self) -> &B::Storage {
        &self.under_test
    }

    /// The mirror on the reference backend.
    pub fn reference(&self) -> &R::Storage {
        &self.reference
    }
}

impl<B: Backend, R: Backend> fmt::Debug for CheckedStorage<B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckedStorage")
            .field("under_test", &self.under_test)
            .field("reference", &self.reference)
            .finish()
    }
}

impl<B: Backend, R: Backend> BackendStorage for CheckedStorage<B, R> {
    fn dtype(&self) -> DType {
        self.under_test.dtype()
    }

    fn len(&self) -> usize {
        self.under_test.len()
    }
}
