//! Opening devices: the driver is initialised once per process and each device gets one
//! [`Runtime`] (context, stream, buffer pool, modules) shared by every handle on it. This is the
//! [`DeviceRegistry`] that gives `Cuda::new()` (device 0) and `Cuda::select(ordinal)` (also
//! `Cuda::from_ordinal(ordinal)`).

use crate::cuda::driver::CudaDriver;
use crate::cuda::driver_error::{backend_error, no_device};
use crate::options::CudaOptions;
use cust::device::Device as CuDevice;
use cust::CudaFlags;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tessera_core::Result;
use tessera_gpu::{DeviceRegistry, GemmOptions, Runtime};

/// Initialises the driver once (`cuInit`); the error is kept for later calls.
fn init() -> Result<()> {
    static INIT: OnceLock<Result<()>> = OnceLock::new();
    INIT.get_or_init(|| {
        cust::init(CudaFlags::empty()).map_err(|e| {
            no_device(format!(
                "cuInit failed: {e:?}: {}",
                e.to_string().trim_matches('"')
            ))
        })
    })
    .clone()
}

/// Number of CUDA devices; [`tessera_core::Error::NoDevice`] without a driver.
pub fn device_count() -> Result<usize> {
    init()?;
    CuDevice::num_devices()
        .map(|n| n as usize)
        .map_err(|e| no_device(format!("cuDeviceGetCount failed: {e:?}")))
}

impl DeviceRegistry for CudaDriver {
    /// The device ordinal (default 0; `CUDA_VISIBLE_DEVICES` chooses which GPUs are visible).
    type Selector = usize;

    fn runtime(ordinal: usize) -> Result<Arc<Runtime<CudaDriver>>> {
        open(ordinal)
    }

    /// [`CudaOptions::from_env`]: cuBLAS when it loads, else the tiled kernel, unless
    /// `TESSERA_CUDA_GEMM` or `TESSERA_CUDA_GEMM_TILES` say otherwise.
    fn default_options() -> Result<GemmOptions> {
        CudaOptions::from_env().map(GemmOptions::from)
    }
}

/// The runtime of device `ordinal`, created on first use.
fn open(ordinal: usize) -> Result<Arc<Runtime<CudaDriver>>> {
    let count = device_count()?;
    if ordinal >= count {
        return Err(no_device(format!(
            "CUDA device {ordinal} was requested but {count} device(s) are present"
        )));
    }
    static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<Runtime<CudaDriver>>>>> = OnceLock::new();
    let mut devices = DEVICES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .map_err(|_| backend_error("open device", "the device registry was poisoned"))?;
    if let Some(rt) = devices.get(&ordinal) {
        return Ok(rt.clone());
    }
    let rt = Runtime::new(CudaDriver::open(ordinal)?)?;
    devices.insert(ordinal, rt.clone());
    Ok(rt)
}
