//! Tests of the CUDA backend's host path without an NVIDIA GPU: the engine with CUDA's profile
//! (the one `CudaDriver` applies: errors named `cuda`, blocks of 256, grid z up to 65 535, a
//! pool that caches everything) and CUDA's options, over `tessera_opencl::testing::emulator`:
//! the OpenCL driver describing itself as CUDA, which runs the shared kernels in their OpenCL
//! dialect on the default OpenCL device (PoCL on the CPU in CI). The cuBLAS path goes through
//! the emulator's host BLAS, which computes the column-major call the engine describes. Every
//! test skips, printing why, when no OpenCL device exists.

mod conformance;
mod device_behaviour;
mod memory;

use crate::cuda::driver::apply_cuda_profile;
use crate::options::CudaOptions;
use std::sync::{Arc, OnceLock};
use tessera_gpu::{DriverInfo, GemmEngine, Gpu, Runtime};
use tessera_opencl::testing::emulator;
use tessera_opencl::OpenClDriver;

/// The backend under test: the engine over OpenCL, driven like a CUDA device.
pub(crate) type Emulated = Gpu<OpenClDriver>;

/// A new runtime on the default OpenCL device with CUDA's profile (then `adjust`), with the
/// host BLAS when `blas`, or why there is none.
fn open(
    blas: bool,
    adjust: impl FnOnce(&mut DriverInfo),
) -> Result<Arc<Runtime<OpenClDriver>>, String> {
    let driver = emulator(|info| {
        apply_cuda_profile(info);
        info.name = format!("{} (CUDA emulated on OpenCL)", info.name);
        adjust(info);
    })
    .map_err(|e| e.to_string())?;
    let driver = if blas {
        driver.with_host_blas()
    } else {
        driver
    };
    Runtime::new(driver).map_err(|e| e.to_string())
}

/// A handle with `gemm` and otherwise CUDA's default options.
fn handle(rt: Arc<Runtime<OpenClDriver>>, gemm: GemmEngine) -> Emulated {
    let options = CudaOptions {
        gemm,
        ..CudaOptions::default()
    };
    Gpu::from_runtime(rt, options.into()).expect("CUDA's default options are valid")
}

/// Prints why an emulated test is skipped.
fn skip(reason: &str) {
    eprintln!("skipped: no OpenCL device to emulate the CUDA driver on ({reason})");
}

/// A new emulated device of its own (its counters see no other test's work), whose CUDA
/// profile `adjust` may change; None after printing why there is none.
pub(crate) fn private_emulated(adjust: impl FnOnce(&mut DriverInfo)) -> Option<Emulated> {
    match open(false, adjust) {
        Ok(rt) => Some(handle(rt, GemmEngine::Auto)),
        Err(reason) => {
            skip(&reason);
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
        Ok(handle(open(blas, |_| {})?, gemm))
    });
    match made {
        Ok(dev) => Some(dev.clone()),
        Err(reason) => {
            skip(reason);
            None
        }
    }
}
