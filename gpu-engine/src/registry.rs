//! [`DeviceRegistry`]: how users open the devices of a driver. A driver that implements it gets
//! the constructors of its backend for free: [`crate::Gpu::new`] (the default device),
//! [`crate::Gpu::select`] (a device by selector) and [`crate::Gpu::from_ordinal`].

use crate::driver::Driver;
use crate::gemm::GemmOptions;
use crate::runtime::Runtime;
use std::sync::Arc;
use tessera_core::Result;

/// The process-wide devices of a driver.
pub trait DeviceRegistry: Driver {
    /// How a caller designates a device (`tessera_opencl::DeviceSelector`, a CUDA ordinal). Its
    /// default designates the default device; every selector converts from an ordinal, so that
    /// `Gpu::from_ordinal(n)` works on every backend.
    type Selector: Default + From<usize>;

    /// The runtime of the designated device: one per device and process, created on first use
    /// and shared by every handle on the device, so that their tensors can meet in one op.
    ///
    /// # Errors
    /// [`tessera_core::Error::NoDevice`] (saying what to install, or which devices exist) when
    /// there is no driver or no such device; a driver error when it cannot be opened.
    fn runtime(selector: Self::Selector) -> Result<Arc<Runtime<Self>>>;

    /// The GEMM options of a new handle (CUDA reads them from the environment). Default:
    /// [`GemmOptions::default`].
    ///
    /// # Errors
    /// When the environment asks for something invalid.
    fn default_options() -> Result<GemmOptions> {
        Ok(GemmOptions::default())
    }
}
