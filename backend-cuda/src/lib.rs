//! # backend-cuda (not implemented yet)
//!
//! Tessera's NVIDIA backend will live here: `cust` (driver API), kernels shared with the OpenCL
//! backend and compiled at run time by NVRTC, cuBLAS loaded at run time for GEMM, a caching
//! allocator and one stream per device. None of that exists yet; this crate is an empty
//! placeholder so the workspace layout is fixed. It deliberately exports nothing, so no code can
//! mistake it for a working backend.
