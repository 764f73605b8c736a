//! [`Gpu`]: a handle on one device of a [`Driver`], and the [`tessera_core::Backend`] of every GPU
//! backend (`tessera_opencl::OpenCl` is `Gpu<OpenClDriver>`, `tessera_cuda::Cuda` is
//! `Gpu<CudaDriver>`). This file holds what a handle is and how it is made; the `Backend`
//! implementation is in `backend.rs`.

use crate::attention_route::AttentionRoute;
use crate::counters::RuntimeStats;
use crate::driver::Driver;
use crate::gemm::{GemmConfig, GemmEngine, GemmOptions};
use crate::pool::MemoryUsage;
use crate::registry::DeviceRegistry;
use crate::runtime::Runtime;
use std::sync::Arc;
use tessera_core::{DType, Result};

/// A handle on one device: its shared runtime, this handle's GEMM options and attention route.
/// Cheap to clone;
/// handles with different options on one device share everything else, and their tensors can
/// meet in one op.
///
/// Ops queue work on the device's one in-order queue and return at once; only reading data
/// back ([`tessera_core::Tensor::to_vec`] and friends, i.e. [`tessera_core::Backend::download`])
/// and [`tessera_core::Backend::synchronize`] wait for the device. Errors raised by queued work
/// (an index out of range, a failed kernel) are reported there.
pub struct Gpu<D: Driver> {
    rt: Arc<Runtime<D>>,
    options: GemmOptions,
    attention: AttentionRoute,
}

impl<D: Driver> Clone for Gpu<D> {
    fn clone(&self) -> Self {
        Gpu {
            rt: self.rt.clone(),
            options: self.options,
            attention: self.attention,
        }
    }
}

impl<D: Driver> std::fmt::Debug for Gpu<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("device", &self.rt.info().to_string())
            .field("options", &self.options)
            .field("attention", &self.attention)
            .finish()
    }
}

impl<D: DeviceRegistry> Gpu<D> {
    /// The default device of the driver ([`DeviceRegistry::Selector`]'s default: for OpenCL the
    /// device `TESSERA_OPENCL_DEVICE` names, else the first GPU, else the first device; for
    /// CUDA device 0), with the driver's default options ([`DeviceRegistry::default_options`]).
    ///
    /// # Errors
    /// [`tessera_core::Error::NoDevice`] (saying what to install) without a driver or device; a
    /// driver error when the device cannot be opened.
    pub fn new() -> Result<Self> {
        Self::select(D::Selector::default())
    }

    /// The device `selector` designates (`tessera_opencl::DeviceSelector`; a CUDA ordinal),
    /// with the driver's default options and the attention route `TESSERA_GPU_ATTENTION` names
    /// ([`AttentionRoute::from_env`]). Every handle on one device shares one runtime per process.
    ///
    /// # Errors
    /// As [`Gpu::new`]; `NoDevice` says which devices exist when the selector matches none.
    pub fn select(selector: D::Selector) -> Result<Self> {
        Self::from_runtime(D::runtime(selector)?, D::default_options()?)
    }

    /// The device at position `ordinal` of the driver's devices, on every backend.
    ///
    /// # Errors
    /// As [`Gpu::select`].
    pub fn from_ordinal(ordinal: usize) -> Result<Self> {
        Self::select(D::Selector::from(ordinal))
    }
}

impl<D: Driver> Gpu<D> {
    /// A handle on `rt` whose matrix products follow `options` (for drivers without a
    /// [`DeviceRegistry`], and for tests that build their own runtime), with the attention
    /// route `TESSERA_GPU_ATTENTION` names.
    ///
    /// # Errors
    /// When the driver rejects the options ([`Driver::check_gemm_options`]) or the variable
    /// names no route.
    pub fn from_runtime(rt: Arc<Runtime<D>>, options: GemmOptions) -> Result<Self> {
        rt.driver().check_gemm_options(&options)?;
        let attention = AttentionRoute::from_env()?;
        Ok(Gpu {
            rt,
            options,
            attention,
        })
    }

    /// The same device with other GEMM options (tensors of both handles can meet in one op).
    ///
    /// # Errors
    /// When the driver rejects the options ([`Driver::check_gemm_options`]), e.g. CUDA tiles
    /// needing more than 1024 threads.
    pub fn with_options(&self, options: GemmOptions) -> Result<Self> {
        self.rt.driver().check_gemm_options(&options)?;
        Ok(Gpu {
            rt: self.rt.clone(),
            options,
            attention: self.attention,
        })
    }

    /// The same device with another attention route (see [`AttentionRoute`]; `Auto` by
    /// default). Other handles are unaffected.
    pub fn with_attention(&self, route: AttentionRoute) -> Self {
        Gpu {
            attention: route,
            ..self.clone()
        }
    }

    /// This handle's attention route.
    pub fn attention_route(&self) -> AttentionRoute {
        self.attention
    }

    /// The same device with another GEMM engine: [`GemmEngine::Blas`] (cuBLAS on CUDA),
    /// [`GemmEngine::Tiled`] (the shared kernel) or [`GemmEngine::Auto`].
    pub fn with_gemm(&self, engine: GemmEngine) -> Self {
        Gpu {
            rt: self.rt.clone(),
            options: GemmOptions {
                engine,
                ..self.options
            },
            attention: self.attention,
        }
    }

    /// The same device with TF32 allowed (or not) for its f32 matrix products
    /// ([`GemmOptions::allow_tf32`]; off by default). Other handles are unaffected.
    pub fn with_tf32(&self, allow: bool) -> Self {
        Gpu {
            rt: self.rt.clone(),
            options: GemmOptions {
                allow_tf32: allow,
                ..self.options
            },
            attention: self.attention,
        }
    }

    /// This handle's GEMM options.
    pub fn options(&self) -> &GemmOptions {
        &self.options
    }

    /// The GEMM kernel and tiles this handle's matrix products of `dtype` use: the requested
    /// configuration, or the driver's own choice (OpenCL tunes its tiles per device on first
    /// use, see `tessera_opencl::autotune`).
    pub fn gemm_config(&self, dtype: DType) -> Result<GemmConfig> {
        D::gemm_config(&self.rt, dtype, self.options.config)
    }

    /// The shared per-device runtime.
    pub fn runtime(&self) -> &Arc<Runtime<D>> {
        &self.rt
    }

    /// The driver, for what only it knows (the OpenCL device description, the CUDA compute
    /// capability, the cuBLAS library).
    pub fn driver(&self) -> &D {
        self.rt.driver()
    }

    /// The device's name, e.g. `NVIDIA H200` or `cpu-haswell-AMD EPYC ...` (PoCL).
    pub fn device_name(&self) -> &str {
        &self.rt.info().name
    }

    /// The device's counters: host synchronisations, buffers created and reused, kernel
    /// launches, vendor BLAS calls, kernel modules built (shared by every handle on the device,
    /// cumulative).
    pub fn stats(&self) -> RuntimeStats {
        self.rt.stats()
    }

    /// What the device's caching buffer pool holds.
    pub fn memory_usage(&self) -> MemoryUsage {
        self.rt.memory_usage()
    }

    /// Waits for the device, then frees every buffer the pool keeps for reuse.
    ///
    /// # Errors
    /// An error raised by queued work (see [`tessera_core::Backend::synchronize`]).
    pub fn empty_cache(&self) -> Result<()> {
        self.rt.empty_cache()
    }
}
