//! Timing GEMM configurations, for drivers that choose their tiles per device
//! ([`crate::Driver::gemm_config`]): `backend-opencl`'s autotuner times candidates with
//! [`time_gemm`] and caches the winner.

use crate::driver::Driver;
use crate::gemm::GemmConfig;
use crate::ops::blas_layout::GemmProblem;
use crate::ops::matmul::launch_kernel;
use crate::ops::transfer::full;
use crate::runtime::Runtime;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_core::{DType, Result};

/// The best of three timed runs of a `size`-cube product of `dtype` with `config` (after a
/// warm-up run that also builds the kernel). Waits for the device five times.
///
/// # Errors
/// Whatever the device reports, e.g. a work-group too large for the kernel's registers.
pub fn time_gemm<D: Driver>(
    rt: &Arc<Runtime<D>>,
    dtype: DType,
    config: &GemmConfig,
    size: usize,
) -> Result<Duration> {
    let s = size;
    let a = full(rt, s * s, dtype, 0.5)?;
    let b = full(rt, s * s, dtype, 0.25)?;
    let c = rt.alloc(dtype, s * s)?;
    let problem = GemmProblem {
        m: s,
        n: s,
        k: s,
        a: [0, s, 1, 0],
        b: [0, s, 1, 0],
        c_offset: 0,
        batch: 1,
    };
    launch_kernel(rt, config, &a, &b, &c, &problem)?;
    rt.finish()?;
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        launch_kernel(rt, config, &a, &b, &c, &problem)?;
        rt.finish()?;
        best = best.min(start.elapsed());
    }
    Ok(best)
}
