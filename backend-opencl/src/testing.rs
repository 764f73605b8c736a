//! The OpenCL driver for other crates' tests (feature `testing`): `backend-cuda` runs the
//! engine's CUDA path (its launch geometry, its BLAS mapping) on an OpenCL device such as PoCL,
//! with the kernels in their OpenCL dialect.

pub use crate::buffer::DeviceBuffer;
use crate::device::{find_devices, DeviceSelector};
pub use crate::driver::OpenClDriver;
use tessera_core::Result;
use tessera_gpu::DriverInfo;

/// A new driver on the default device ([`DeviceSelector::Default`]), not shared with
/// [`crate::OpenCl`]'s runtimes, whose description `adjust` may change first: the backend name
/// errors carry, the block sizes (programs are built with the adjusted `reduce_group`), the
/// largest grid z.
///
/// # Errors
/// [`tessera_core::Error::NoDevice`] without an OpenCL runtime or device.
pub fn open_driver(adjust: impl FnOnce(&mut DriverInfo)) -> Result<OpenClDriver> {
    let found = DeviceSelector::Default.choose(&find_devices()?)?;
    let mut driver = OpenClDriver::create(found.info, found.device, crate::error::BACKEND)?;
    adjust(driver.info_mut());
    Ok(driver)
}
