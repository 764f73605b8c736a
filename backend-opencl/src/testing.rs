//! Running the engine under another driver's description on an OpenCL device (feature
//! `testing`; for tests, never for production use).
//!
//! A driver crate proves its host path without its hardware this way: [`emulator`] is this
//! crate's OpenCL driver on the default OpenCL device (PoCL on a CPU in CI), describing itself
//! with the [`DriverInfo`] the test asks for (backend name, block sizes of one-dimensional
//! launches and reductions, largest grid z, f64 support), so that the engine plans every op
//! exactly as it would for that driver, and builds the shared kernels in their OpenCL dialect
//! with those block sizes. It uses the GEMM tiles it is asked for (no autotuning). With
//! [`OpenClDriver::with_host_blas`], matrix products the engine sends to a vendor BLAS are
//! computed on the host from the column-major call it describes
//! ([`tessera_gpu::testing::host_gemm`]), which checks the engine's row-major to column-major
//! mapping (cuBLAS's) without the library.
//!
//! `backend-cuda`'s unit tests run the whole conformance suite this way, with CUDA's launch
//! geometry and options, and `gpu-engine`'s tests check that the engine honours a driver's
//! description.
//!
//! ```no_run
//! use tessera_gpu::{GemmOptions, Gpu, Runtime};
//! use tessera_opencl::testing::emulator;
//! # fn main() -> tessera_core::Result<()> {
//! let driver = emulator(|info| {
//!     info.backend = "mygpu";
//!     info.launch_group = 128;
//!     info.reduce_group = 128;
//!     info.max_grid_z = 65_535;
//! })?
//! .with_host_blas();
//! let dev = Gpu::from_runtime(Runtime::new(driver)?, GemmOptions::default())?;
//! let x = tessera_core::Tensor::from_vec(vec![1.0f32, 2.0], [2], &dev)?;
//! assert_eq!(x.sum_all()?.to_vec::<f32>()?, vec![3.0]);
//! # Ok(()) }
//! ```

use crate::device::{find_devices, DeviceSelector};
use crate::driver::OpenClDriver;
use opencl3::context::Context;
use std::sync::OnceLock;
use tessera_core::{Error, Result};
use tessera_gpu::DriverInfo;

/// A new driver on the default OpenCL device ([`DeviceSelector::Default`]: the device
/// `TESSERA_OPENCL_DEVICE` names, else the first GPU, else the first device) with a context and
/// queue of its own, whose description (the device's own, as [`crate::OpenCl`] gets it: backend
/// `opencl`, blocks of 256 work-items on a GPU and 64 elsewhere, no grid limit, a pool limit of
/// a quarter of the memory) `adjust` may change first: the backend name errors carry, the
/// device name, the block sizes (programs are built with the adjusted `reduce_group`), the
/// largest grid z, the pool limit, and f64 support (off only).
///
/// # Errors
/// [`Error::NoDevice`] without an OpenCL runtime or device; [`Error::InvalidArgument`] when
/// the adjusted description asks for more than the device has (blocks larger than its
/// work-groups or not a power of two, f64 on a device without it); a driver error otherwise.
pub fn emulator(adjust: impl FnOnce(&mut DriverInfo)) -> Result<OpenClDriver> {
    let found = DeviceSelector::Default.choose(&find_devices()?)?;
    // PoCL may free a device's state when its last context is released; emulated devices come
    // and go with the tests, so one context on the device lives as long as the process.
    static ANCHOR: OnceLock<Option<Context>> = OnceLock::new();
    ANCHOR.get_or_init(|| Context::from_device(&found.device).ok());
    let mut info = OpenClDriver::default_info(&found.info);
    adjust(&mut info);
    let too_much = |msg: String| Error::InvalidArgument {
        op: "emulator",
        msg: format!("{msg} on {}", found.info.name),
    };
    let max_group = found.info.max_work_group_size.max(1);
    for block in [info.launch_group, info.reduce_group] {
        if block == 0 || block as usize > max_group || !block.is_power_of_two() {
            return Err(too_much(format!(
                "blocks of {block} work-items (at most {max_group}, a power of two)"
            )));
        }
    }
    if info.supports_f64 && !found.info.has_fp64 {
        return Err(too_much("f64 without cl_khr_fp64".into()));
    }
    let mut driver = OpenClDriver::create_as(found.info, found.device, info)?;
    driver.emulated = true;
    Ok(driver)
}

impl OpenClDriver {
    /// The same driver with a vendor BLAS computed on the host
    /// ([`tessera_gpu::testing::host_gemm`]) for its float products, as the CUDA driver sends
    /// them to cuBLAS (feature `testing`).
    pub fn with_host_blas(mut self) -> Self {
        self.host_blas = Some(tessera_gpu::testing::host_gemm::<OpenClDriver>);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::Tensor;
    use tessera_gpu::{Driver, GemmOptions, Gpu, Runtime};

    /// The emulator under `adjust`, or None after printing why there is none.
    fn open(adjust: impl FnOnce(&mut DriverInfo)) -> Option<OpenClDriver> {
        match emulator(adjust) {
            Ok(driver) => Some(driver),
            Err(Error::NoDevice { reason, .. }) => {
                eprintln!("skipped: no OpenCL device ({reason})");
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn the_emulator_describes_itself_as_asked_and_names_its_errors_so() {
        let Some(driver) = open(|info| {
            info.backend = "mygpu";
            info.launch_group = 32;
            info.max_grid_z = 7;
        }) else {
            return;
        };
        let info = driver.info();
        assert_eq!(
            (info.backend, info.launch_group, info.max_grid_z),
            ("mygpu", 32, 7)
        );
        assert_eq!(
            driver.blas_unavailable().as_deref(),
            Some("the emulated device has no BLAS (see with_host_blas)")
        );
        let driver = driver.with_host_blas();
        assert_eq!(driver.blas_unavailable(), None);
        let rt = Runtime::new(driver).unwrap();
        let dev = Gpu::from_runtime(rt, GemmOptions::default()).unwrap();
        let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev).unwrap();
        let product = a.matmul(&a).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(product, [7.0, 10.0, 15.0, 22.0]);
        assert!(dev.stats().blas_calls > 0, "{:?}", dev.stats());
        // An error of the driver itself carries the name it was given.
        let err = dev.driver().cl_error("probe", -5);
        assert!(
            matches!(
                err,
                Error::Backend {
                    backend: "mygpu",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_description_the_device_cannot_meet_is_refused() {
        let Some(device) = open(|_| {}) else {
            return;
        };
        drop(device);
        for adjust in [
            (|info: &mut DriverInfo| info.launch_group = 3) as fn(&mut DriverInfo),
            |info| info.reduce_group = 1 << 30,
            |info| info.launch_group = 0,
        ] {
            let err = emulator(adjust).err().unwrap();
            assert!(
                matches!(&err, Error::InvalidArgument { op: "emulator", msg } if msg.contains("work-items")),
                "{err:?}"
            );
        }
    }
}
