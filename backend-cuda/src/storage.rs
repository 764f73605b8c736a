//! [`CudaStorage`]: device memory holding elements of one dtype on an NVIDIA GPU.

use crate::cuda::driver::CudaDriver;
use gpu_engine::GpuStorage;
use gpu_engine::StorageOf;
use std::fmt;
use tensor_core::{BackendStorage, DType};

/// Device memory for `len()` elements of one dtype (booleans as bytes). Dropping it gives the
/// memory back to its device's caching buffer pool.
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
