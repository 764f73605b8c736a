//! [`OpenCl`]: the [`tessera_core::Backend`] of an OpenCL device: the engine of `gpu-engine` over
//! an [`OpenClDriver`], one runtime per device and process.

use crate::autotune::GemmConfig;
use crate::counters::RuntimeStats;
use crate::device::{find_devices, DeviceInfo, DeviceSelector};
use crate::driver::{lock, OpenClDriver};
use crate::error::BACKEND;
use crate::storage::OpenClStorage;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use tessera_core::{DType, Result};
use tessera_gpu::{GemmEngine, GemmOptions, Gpu, Runtime};

/// An OpenCL device. Cheap to clone; every handle on one device shares its context, queue,
/// program cache and buffer pool.
///
/// Ops enqueue kernels on the device's in-order queue and return at once; only reading data back
/// ([`tessera_core::Tensor::to_vec`] and friends, i.e. [`tessera_core::Backend::download`]) and
/// [`tessera_core::Backend::synchronize`] wait for the device. Errors detected by kernels (an
/// index out of range) are reported there.
#[derive(Clone)]
pub struct OpenCl {
    gpu: Gpu<OpenClDriver>,
}

/// The process-wide runtimes, by device ordinal.
fn registry() -> &'static Mutex<HashMap<usize, Arc<Runtime<OpenClDriver>>>> {
    static RUNTIMES: OnceLock<Mutex<HashMap<usize, Arc<Runtime<OpenClDriver>>>>> = OnceLock::new();
    RUNTIMES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The runtime of the device `selector` designates, created on first use.
fn open(selector: DeviceSelector) -> Result<Arc<Runtime<OpenClDriver>>> {
    let found = selector.choose(&find_devices()?)?;
    let mut runtimes = lock(registry(), "open device")?;
    if let Some(rt) = runtimes.get(&found.info.ordinal) {
        return Ok(rt.clone());
    }
    let ordinal = found.info.ordinal;
    let rt = Runtime::new(OpenClDriver::create(found.info, found.device, BACKEND)?)?;
    runtimes.insert(ordinal, rt.clone());
    Ok(rt)
}

/// Matrix products on OpenCL: the GEMM kernel only (no vendor BLAS), with the tiles the
/// autotuner chooses per device and dtype.
fn gemm_options() -> GemmOptions {
    GemmOptions {
        engine: GemmEngine::Tiled,
        ..GemmOptions::default()
    }
}

impl OpenCl {
    /// The default device: the one [`crate::DEVICE_ENV_VAR`] names, else the first GPU, else
    /// the first device.
    ///
    /// # Errors
    /// [`tessera_core::Error::NoDevice`] (saying what to install) when there is no OpenCL runtime
    /// or device; a driver error when the context cannot be created.
    pub fn new() -> Result<Self> {
        Self::select(DeviceSelector::Default)
    }

    /// The device at position `ordinal` of [`crate::list_devices`].
    pub fn from_ordinal(ordinal: usize) -> Result<Self> {
        Self::select(DeviceSelector::Ordinal(ordinal))
    }

    /// Device `device` of platform `platform`.
    pub fn from_platform_device(platform: usize, device: usize) -> Result<Self> {
        Self::select(DeviceSelector::PlatformDevice(platform, device))
    }

    /// The device `selector` designates.
    pub fn select(selector: DeviceSelector) -> Result<Self> {
        Ok(OpenCl {
            gpu: Gpu::new(open(selector)?, gemm_options()),
        })
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        self.gpu.runtime().driver().device_info()
    }

    /// The device's counters: host synchronisations, buffers created and reused, kernels
    /// launched, programs built (shared by every handle on the device, cumulative).
    pub fn stats(&self) -> RuntimeStats {
        let rt = self.gpu.runtime();
        let driver = rt.driver();
        RuntimeStats::from_engine(rt.stats(driver.program_builds()), driver.program_builds())
    }

    /// Bytes of free buffers the pool keeps for reuse.
    pub fn pooled_bytes(&self) -> usize {
        self.gpu.runtime().driver().cached_bytes()
    }

    /// The GEMM kernel and tiles used for `dtype` (tuned on first use, see
    /// [`crate::autotune`]).
    pub fn gemm_config(&self, dtype: DType) -> Result<GemmConfig> {
        crate::autotune::gemm_config(self.gpu.runtime(), dtype)
    }

    /// The engine handle (what [`tessera_gpu::impl_gpu_backend!`] calls).
    fn gpu(&self) -> &Gpu<OpenClDriver> {
        &self.gpu
    }
}

impl fmt::Debug for OpenCl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenCl({})", self.info())
    }
}

tessera_gpu::impl_gpu_backend!(OpenCl, OpenClStorage);
