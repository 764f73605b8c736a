//! Defensive checks run at the entry of every primitive.
//!
//! `tensor-core` validates shapes and dtypes before calling a backend, but the [`tessera_core::Backend`]
//! methods are public, so a caller may hand the CPU backend a layout that does not fit its storage.
//! These checks turn such requests into errors; after them every kernel may index its slices
//! without further bounds reasoning (the indexing stays checked, so a bug would panic, never
//! read out of bounds).

use crate::CpuStorage;
use tessera_core::{BackendStorage, DType, Error, Layout, Result};

/// [`Layout::check_fits`] against the length of `storage`.
pub(crate) fn check_storage(op: &'static str, storage: &CpuStorage, layout: &Layout) -> Result<()> {
    layout.check_fits(op, storage.len())
}

/// The error for two storages whose dtypes should match but do not.
pub(crate) fn dtype_mismatch(op: &'static str, lhs: &CpuStorage, rhs: &CpuStorage) -> Error {
    Error::DTypeMismatch {
        op,
        lhs: lhs.dtype(),
        rhs: rhs.dtype(),
    }
}

/// The error for an op that is not defined for `dtype`.
pub(crate) fn unsupported(op: &'static str, dtype: DType) -> Error {
    Error::UnsupportedDType { op, dtype }
}
