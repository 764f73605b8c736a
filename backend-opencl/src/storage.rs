//! [`OpenClStorage`]: a pooled device buffer holding elements of one dtype.

use crate::driver::OpenClDriver;
use std::fmt;
use tessera_core::{BackendStorage, DType};
use tessera_gpu::{GpuStorage, StorageOf};

/// Device memory for `len()` elements of one dtype (booleans as bytes). Dropping it returns the
/// buffer to its device's pool.
pub struct OpenClStorage(GpuStorage<OpenClDriver>);

impl BackendStorage for OpenClStorage {
    fn dtype(&self) -> DType {
        self.0.dtype()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

impl fmt::Debug for OpenClStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl StorageOf<OpenClDriver> for OpenClStorage {
    fn gpu(&self) -> &GpuStorage<OpenClDriver> {
        &self.0
    }

    fn wrap(storage: GpuStorage<OpenClDriver>) -> Self {
        OpenClStorage(storage)
    }
}
