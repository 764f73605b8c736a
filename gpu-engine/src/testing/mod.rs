//! What a driver under test borrows from the engine (feature `testing`; for tests, never for
//! production use): [`host_gemm`], a vendor BLAS computed on the host from the column-major call
//! the engine describes, which checks the engine's row-major to column-major mapping (cuBLAS's)
//! without the library, through any driver's `read` and `write`.
//!
//! The emulator that runs the engine under another driver's description (block sizes, grid
//! limits, backend name) on an OpenCL device such as PoCL is the OpenCL driver itself:
//! `tessera_opencl::testing::emulator`, whose `with_host_blas` plugs [`host_gemm`] in.
//! `backend-cuda`'s unit tests run the whole conformance suite that way, with CUDA's launch
//! geometry and options.

mod host_blas;

pub use host_blas::{host_gemm, round_to_tf32};
