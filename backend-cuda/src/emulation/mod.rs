//! Tests of the CUDA backend's engine path without an NVIDIA GPU: the engine (`Gpu`) with CUDA's
//! options and launch geometry (blocks of 256, grid z up to 65 535, errors named `cuda`) over
//! `backend-opencl`'s driver, running the shared kernels in their OpenCL dialect on the first
//! OpenCL device (PoCL on the CPU in CI). The cuBLAS path goes through [`HostBlas`], which
//! computes the column-major call on the host. Every test skips, printing why, when no OpenCL
//! device exists.

mod conformance;
mod device_behaviour;
mod host_blas;

use crate::cuda::driver::BLOCK;
use crate::options::CudaOptions;
use host_blas::HostBlas;
use std::sync::{Arc, OnceLock};
use tessera_gpu::{GemmEngine, Gpu, GpuStorage, Runtime};

/// The backend under test: the engine over OpenCL, driven like a CUDA device.
#[derive(Clone, Debug)]
pub(crate) struct Emulated {
    gpu: Gpu<HostBlas>,
}

impl Emulated {
    /// The engine handle (what `impl_gpu_backend!` calls).
    fn gpu(&self) -> &Gpu<HostBlas> {
        &self.gpu
    }

    /// The device's runtime.
    pub(crate) fn runtime(&self) -> &Arc<Runtime<HostBlas>> {
        self.gpu.runtime()
    }
}

tessera_gpu::impl_gpu_backend!(Emulated, GpuStorage<HostBlas>);

/// A new runtime on the first OpenCL device with CUDA's geometry, or why there is none.
fn open(blas: bool) -> Result<Arc<Runtime<HostBlas>>, String> {
    let driver = tessera_opencl::testing::open_driver(|info| {
        info.backend = "cuda";
        info.name = format!("{} (OpenCL emulation)", info.name);
        info.launch_group = BLOCK;
        info.reduce_group = BLOCK;
        info.max_grid_z = 65_535;
    })
    .map_err(|e| e.to_string())?;
    Runtime::new(HostBlas::new(driver, blas)).map_err(|e| e.to_string())
}

/// A handle with `gemm` and otherwise CUDA's default options.
fn handle(rt: Arc<Runtime<HostBlas>>, gemm: GemmEngine) -> Emulated {
    let options = CudaOptions {
        gemm,
        ..CudaOptions::default()
    };
    Emulated {
        gpu: Gpu::new(rt, options.into()),
    }
}

/// A new emulated device of its own (its counters see no other test's work), or None after
/// printing why.
pub(crate) fn private_emulated() -> Option<Emulated> {
    match open(false) {
        Ok(rt) => Some(handle(rt, GemmEngine::Auto)),
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
        let gemm = if blas {
            GemmEngine::Blas
        } else {
            GemmEngine::Tiled
        };
        Ok(handle(open(blas)?, gemm))
    });
    match made {
        Ok(dev) => Some(dev.clone()),
        Err(reason) => {
            eprintln!("skipped: no OpenCL device to emulate the CUDA driver on ({reason})");
            None
        }
    }
}
