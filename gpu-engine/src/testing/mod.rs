//! Running the engine under another driver's description on an OpenCL device (feature
//! `testing`; for tests, never for production use).
//!
//! A driver crate proves its host path without its hardware this way: [`Emulator`] runs the
//! shared kernels in their OpenCL dialect on the first OpenCL device (PoCL on a CPU in CI) while
//! describing itself with the [`crate::DriverInfo`] the test asks for (backend name, block
//! sizes of one-dimensional launches and reductions, largest grid z, f64 support), so that the
//! engine plans every op exactly as it would for that driver. With
//! [`Emulator::with_host_blas`], matrix products the engine sends to a vendor BLAS are computed
//! on the host from the column-major call it describes ([`host_gemm`]), which checks the
//! engine's row-major to column-major mapping (cuBLAS's) without the library.
//!
//! `backend-cuda`'s unit tests run the whole conformance suite this way, with CUDA's launch
//! geometry and options.
//!
//! ```no_run
//! use tessera_gpu::testing::Emulator;
//! use tessera_gpu::{GemmOptions, Gpu, Runtime};
//! # fn main() -> tessera_core::Result<()> {
//! let emulator = Emulator::open(|info| {
//!     info.backend = "mygpu";
//!     info.launch_group = 128;
//!     info.reduce_group = 128;
//!     info.max_grid_z = 65_535;
//! })?
//! .with_host_blas();
//! let dev = Gpu::from_runtime(Runtime::new(emulator)?, GemmOptions::default())?;
//! let x = tessera_core::Tensor::from_vec(vec![1.0f32, 2.0], [2], &dev)?;
//! assert_eq!(x.sum_all()?.to_vec::<f32>()?, vec![3.0]);
//! # Ok(()) }
//! ```

mod emulator;
mod host_blas;

pub use emulator::{Emulator, EmulatorBuffer};
pub use host_blas::{host_gemm, round_to_tf32};
