//! Opening devices: the driver is initialised once per process and each device gets one
//! [`Runtime`] (context, stream, allocator, modules) shared by every handle on it.

use crate::cuda::driver::CudaDriver;
use crate::cuda::driver_error::{backend_error, no_device};
use cust::device::Device as CuDevice;
use cust::CudaFlags;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tessera_core::Result;
use tessera_gpu::Runtime;

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

/// The runtime of device `ordinal`, created on first use.
pub(crate) fn open(ordinal: usize) -> Result<Arc<Runtime<CudaDriver>>> {
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
