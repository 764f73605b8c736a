//! [`Cuda`]: the [`tessera_core::Backend`] of an NVIDIA GPU.

use crate::cuda::driver::CudaDriver;
use crate::cuda::registry;
use crate::options::CudaOptions;
use crate::storage::CudaStorage;
use std::fmt;
use std::path::PathBuf;
use tessera_core::Result;
use tessera_gpu::GemmEngine;
use tessera_gpu::Gpu;
use tessera_gpu::RuntimeStats;

/// An NVIDIA GPU. Cheap to clone; every handle on one device shares its context, stream,
/// caching allocator, kernel modules and cuBLAS handle.
///
/// Ops queue work on the device's one stream and return at once; only reading data back
/// ([`tessera_core::Tensor::to_vec`] and friends, i.e. [`tessera_core::Backend::download`]) and
/// [`tessera_core::Backend::synchronize`] wait for the device. Errors raised by queued work (an
/// index out of range, a failed kernel) are reported there, naming the kernels that may have
/// raised them.
#[derive(Clone)]
pub struct Cuda {
    gpu: Gpu<CudaDriver>,
    options: CudaOptions,
}

/// Device memory held by the caching allocator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Bytes of free blocks kept for reuse.
    pub cached_bytes: usize,
    /// Bytes obtained from the driver and not given back (in use or cached).
    pub allocated_bytes: usize,
}

impl Cuda {
    /// Device `ordinal` with the options of [`CudaOptions::from_env`].
    ///
    /// # Errors
    /// [`tessera_core::Error::NoDevice`] when there is no CUDA driver (the `libcuda` link stub
    /// answers) or no such device; a driver error when the context cannot be created.
    pub fn new(ordinal: usize) -> Result<Self> {
        Self::with_options(ordinal, CudaOptions::from_env()?)
    }

    /// Device `ordinal` with explicit options.
    pub fn with_options(ordinal: usize, options: CudaOptions) -> Result<Self> {
        options.check()?;
        Ok(Cuda {
            gpu: Gpu::new(registry::open(ordinal)?, options.into()),
            options,
        })
    }

    /// The same device with another GEMM engine (tensors of both handles can meet in one op).
    pub fn with_gemm(&self, gemm: GemmEngine) -> Self {
        let options = CudaOptions {
            gemm,
            ..self.options
        };
        Cuda {
            gpu: Gpu::new(self.gpu.runtime().clone(), options.into()),
            options,
        }
    }

    /// This handle's options.
    pub fn options(&self) -> CudaOptions {
        self.options
    }

    /// The device's name, e.g. `NVIDIA H200`.
    pub fn device_name(&self) -> &str {
        &self.gpu.runtime().info().name
    }

    /// The device's compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        let cc = self.gpu.runtime().driver().compute_capability();
        (cc / 10, cc % 10)
    }

    /// The device's counters: host synchronisations, allocations and reuses, kernel launches,
    /// cuBLAS calls, modules built (shared by every handle on the device, cumulative).
    pub fn stats(&self) -> RuntimeStats {
        let rt = self.gpu.runtime();
        rt.stats(rt.driver().modules_built())
    }

    /// What the caching allocator holds.
    pub fn memory_usage(&self) -> MemoryUsage {
        let (cached_bytes, allocated_bytes) = self.gpu.runtime().driver().memory_usage();
        MemoryUsage {
            cached_bytes,
            allocated_bytes,
        }
    }

    /// Waits for the device and frees every cached block.
    pub fn empty_cache(&self) -> Result<()> {
        self.gpu.runtime().driver().empty_cache()
    }

    /// The cuBLAS library in use, or why there is none (loaded on first call).
    pub fn cublas_library(&self) -> std::result::Result<PathBuf, String> {
        self.gpu.runtime().driver().blas_library()
    }

    fn gpu(&self) -> &Gpu<CudaDriver> {
        &self.gpu
    }
}

impl fmt::Debug for Cuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cuda")
            .field("device", &self.gpu.runtime().info().to_string())
            .field("options", &self.options)
            .finish()
    }
}

tessera_gpu::impl_gpu_backend!(Cuda, CudaStorage);
