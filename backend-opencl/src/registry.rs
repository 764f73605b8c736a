//! The process-wide OpenCL devices: one engine runtime (context, queue, program cache, buffer
//! pool) per device, created on first use and shared by every [`crate::OpenCl`] handle on it.
//! This is the [`DeviceRegistry`] that gives `OpenCl::new()`, `OpenCl::select(..)` and
//! `OpenCl::from_ordinal(n)`.

use crate::clblast::gemm_engine_from_env;
use crate::device::{find_devices, DeviceSelector};
use crate::driver::{lock, OpenClDriver};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tessera_core::Result;
use tessera_gpu::{DeviceRegistry, GemmOptions, Runtime};

/// The runtimes opened so far, by device ordinal.
fn runtimes() -> &'static Mutex<HashMap<usize, Arc<Runtime<OpenClDriver>>>> {
    static RUNTIMES: OnceLock<Mutex<HashMap<usize, Arc<Runtime<OpenClDriver>>>>> = OnceLock::new();
    RUNTIMES.get_or_init(|| Mutex::new(HashMap::new()))
}

impl DeviceRegistry for OpenClDriver {
    /// [`DeviceSelector::Default`]: the device [`crate::DEVICE_ENV_VAR`] names, else the first
    /// GPU, else the first device.
    type Selector = DeviceSelector;

    fn runtime(selector: DeviceSelector) -> Result<Arc<Runtime<OpenClDriver>>> {
        let found = selector.choose(&find_devices()?)?;
        let mut runtimes = lock(runtimes(), "open device")?;
        if let Some(rt) = runtimes.get(&found.info.ordinal) {
            return Ok(rt.clone());
        }
        let ordinal = found.info.ordinal;
        let rt = Runtime::new(OpenClDriver::create(found.info, found.device)?)?;
        runtimes.insert(ordinal, rt.clone());
        Ok(rt)
    }

    /// The engine `TESSERA_OPENCL_GEMM` asks for ([`crate::clblast::GEMM_ENV_VAR`]; default
    /// [`tessera_gpu::GemmEngine::Auto`]: on GPUs and accelerators CLBlast when it loads, the tiled
    /// kernel otherwise and on CPU devices),
    /// with the tiles the autotuner chooses per device and dtype for the tiled kernel (the
    /// requested tiles are ignored, see [`crate::autotune`]).
    ///
    /// # Errors
    /// [`tessera_core::Error::InvalidArgument`] when the variable holds anything but `auto`,
    /// `clblast` (or `blas`) or `tiled`.
    fn default_options() -> Result<GemmOptions> {
        Ok(GemmOptions {
            engine: gemm_engine_from_env()?,
            ..GemmOptions::default()
        })
    }
}
