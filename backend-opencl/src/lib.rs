//! # backend-opencl (not implemented yet)
//!
//! Tessera's OpenCL backend will live here: devices through `opencl3`, kernels written once for
//! OpenCL C and CUDA C, built at run time and cached, pooled buffers and one in-order queue per
//! device. None of that exists yet; this crate is an empty placeholder so the workspace layout is
//! fixed. It deliberately exports nothing, so no code can mistake it for a working backend.
