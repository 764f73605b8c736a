//! Tests of the CUDA backend's host-side logic without an NVIDIA GPU: the engine (`Gpu`) over
//! an OpenCL driver, running the shared kernels in their OpenCL dialect on the first OpenCL
//! device (PoCL on the CPU in CI). Every test skips, printing why, when no OpenCL device exists.

mod conformance;
mod device_behaviour;
pub(crate) mod opencl_driver;

use crate::engine::backend_impl::impl_gpu_backend;
use crate::engine::gpu::{Gpu, StorageOf};
use crate::engine::ops::softmax::RowOp;
use crate::engine::runtime::Runtime;
use crate::engine::storage::GpuStorage;
use crate::options::{CudaOptions, GemmEngine};
use opencl_driver::OpenClDriver;
use std::sync::OnceLock;

impl Gpu<OpenClDriver> {
    /// The handle itself (what `impl_gpu_backend!` calls).
    fn gpu(&self) -> &Self {
        self
    }
}

impl_gpu_backend!(Gpu<OpenClDriver>, GpuStorage<OpenClDriver>);

/// The backend under test: the engine over OpenCL.
pub(crate) type Emulated = Gpu<OpenClDriver>;

/// A new emulated device of its own (its counters see no other test's work), or None after
/// printing why.
pub(crate) fn private_emulated() -> Option<Emulated> {
    let made = OpenClDriver::open(false).and_then(|d| Runtime::new(d).map_err(|e| e.to_string()));
    match made {
        Ok(rt) => Some(Gpu::new(rt, CudaOptions::default())),
        Err(reason) => {
            eprintln!("skipped: no OpenCL device to emulate the CUDA driver on ({reason})");
            None
        }
    }
}

/// The emulated device with the tiled GEMM (`blas = false`) or with the host-emulated cuBLAS
/// path (`blas = true`); None, after printing why, when there is no OpenCL device.
pub(crate) fn emulated(blas: bool) -> Option<Emulated> {
    static TILED: OnceLock<Result<Emulated, String>> = OnceLock::new();
    static BLAS: OnceLock<Result<Emulated, String>> = OnceLock::new();
    let cell = if blas { &BLAS } else { &TILED };
    let made = cell.get_or_init(|| {
        let driver = OpenClDriver::open(blas)?;
        let rt = Runtime::new(driver).map_err(|e| e.to_string())?;
        let gemm = if blas {
            GemmEngine::Cublas
        } else {
            GemmEngine::Tiled
        };
        Ok(Gpu::new(
            rt,
            CudaOptions {
                gemm,
                ..CudaOptions::default()
            },
        ))
    });
    match made {
        Ok(dev) => Some(dev.clone()),
        Err(reason) => {
            eprintln!("skipped: no OpenCL device to emulate the CUDA driver on ({reason})");
            None
        }
    }
}
