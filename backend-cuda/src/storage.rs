//! [`CudaStorage`]: device memory holding elements of one dtype on an NVIDIA GPU.

use crate::cuda::driver::CudaDriver;
use std::fmt;
use tessera_core::{BackendStorage, DType};
use tessera_gpu::GpuStorage;
use tessera_gpu::StorageOf;

/// Device memory for `len()` elements of one dtype (booleans as bytes). Dropping it gives the
/// memory back to its device's caching allocator.
pub struct CudaStorage(GpuStorage<CudaDriver>);

impl BackendStorage for CudaStorage {
    fn dtype(&self) -> DType {
        self.0.dtype()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

impl fmt::Debug for CudaStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl StorageOf<CudaDriver> for CudaStorage {
    fn gpu(&self) -> &GpuStorage<CudaDriver> {
        &self.0
    }

    fn wrap(storage: GpuStorage<CudaDriver>) -> Self {
        CudaStorage(storage)
    }
}
