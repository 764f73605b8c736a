//! Batched matrix products: the driver's BLAS (e.g. cuBLAS `{S,D}gemmStridedBatched`) when the
//! handle asks for it and the driver has one, a GEMM kernel of `gemm.cl.c` otherwise (`gemm` or
//! `gemm_direct`, with the tiles [`Driver::gemm_config`] chooses).
//!
//! Operands are used in place whatever their strides (transposed or broadcast batches need no
//! copy). The batch dimensions of A, B and the contiguous C are simplified together; if more
//! than one batch dimension remains, each index of the outer ones gets its own call. An operand
//! BLAS cannot read in place (no unit stride) goes to the kernel.

use crate::checks::{check_same_dtype, element_count};
use crate::driver::{BlasGemm, Driver, ModuleKey};
use crate::gemm::{GemmConfig, GemmEngine, GemmKernel, GemmOptions};
use crate::ops::blas_layout::{blas_operands, operand, GemmProblem};
use crate::ops::elementwise::copy_strided;
use crate::ops::transfer::full;
use crate::runtime::{Arg, Runtime};
use crate::storage::GpuStorage;
use crate::view::MapPlan;
use std::sync::Arc;

use tessera_core::{BackendStorage, Error, Layout, Result};

/// Rows of A from which a B with non-unit column stride is packed for the direct kernel.
const PACK_MIN_ROWS: usize = 8;

/// Queues `problem` on the kernel of `config`, in launches of at most
/// [`crate::DriverInfo::max_grid_z`] batches.
pub(crate) fn launch_kernel<D: Driver>(
    rt: &Runtime<D>,
    config: &GemmConfig,
    a: &GpuStorage<D>,
    b: &GpuStorage<D>,
    c: &GpuStorage<D>,
    p: &GemmProblem,
) -> Result<()> {
    let tiles = &config.tiles;
    let (wx, wy) = tiles.work_group();
    let module = ModuleKey::gemm(a.dtype(), tiles);
    let max_batch = rt.info().max_grid_z.max(1);
    let mut done = 0;
    while done < p.batch {
        let batch = (p.batch - done).min(max_batch);
        let i = |v: usize| Arg::I64(v as i64);
        let args = [
            i(p.m),
            i(p.n),
            i(p.k),
            Arg::Buffer(a),
            i(p.a[0] + done * p.a[3]),
            i(p.a[1]),
            i(p.a[2]),
            i(p.a[3]),
            Arg::Buffer(b),
            i(p.b[0] + done * p.b[3]),
            i(p.b[1]),
            i(p.b[2]),
            i(p.b[3]),
            Arg::Buffer(c),
            i(p.c_offset + done * p.m * p.n),
        ];
        let grid = [p.n.div_ceil(tiles.bn), p.m.div_ceil(tiles.bm), batch];
        rt.launch(&module, config.kernel.name(), &args, grid, [wx, wy, 1])?;
        done += batch;
    }
    Ok(())
}

/// Queues `problem` on the driver's BLAS: `Some(result)`, or None when there is no BLAS or an
/// operand is not expressible (see `blas_layout`).
fn launch_blas<D: Driver>(
    rt: &Runtime<D>,
    allow_tf32: bool,
    a: &GpuStorage<D>,
    b: &GpuStorage<D>,
    c: &GpuStorage<D>,
    p: &GemmProblem,
) -> Option<Result<()>> {
    let [bt, at] = blas_operands(p)?;
    let call = BlasGemm {
        dtype: a.dtype(),
        allow_tf32,
        m: p.n,
        n: p.m,
        k: p.k,
        a: operand(b.buffer()?, bt),
        b: operand(a.buffer()?, at),
        c: c.buffer()?,
        c_offset: p.c_offset,
        ldc: p.n,
        c_batch_stride: p.m * p.n,
        batch: p.batch,
    };
    rt.blas_gemm(&call)
}

/// `[..batch, m, k] x [..batch, k, n] -> [..batch, m, n]`, f32 or f64.
pub(crate) fn matmul<D: Driver>(
    rt: &Arc<Runtime<D>>,
    options: &GemmOptions,
    a: &GpuStorage<D>,
    la: &Layout,
    b: &GpuStorage<D>,
    lb: &Layout,
) -> Result<GpuStorage<D>> {
    check_same_dtype("matmul", a, b)?;
    let dtype = a.dtype();
    if !dtype.is_float() {
        return Err(Error::UnsupportedDType {
            op: "matmul",
            dtype,
        });
    }
    let (da, db) = (la.dims(), lb.dims());
    let r = da.len();
    if r < 2 || db.len() != r || da[..r - 2] != db[..r - 2] || da[r - 1] != db[r - 2] {
        return Err(Error::MatmulShape {
            lhs: la.shape().clone(),
            rhs: lb.shape().clone(),
        });
    }
    let (m, k, n) = (da[r - 2], da[r - 1], db[r - 1]);
    let batch_dims = &da[..r - 2];
    let batch = element_count(rt, batch_dims.iter().copied())?;
    let outputs = element_count(rt, [batch, m, n])?;
    if outputs == 0 || k == 0 {
        return full(rt, outputs, dtype, 0.0);
    }
    let engine = options.engine;
    if engine == GemmEngine::Blas {
        if let Some(reason) = rt.driver().blas_unavailable() {
            return Err(Error::Backend {
                backend: rt.backend(),
                op: "matmul",
                msg: format!("BLAS was requested but is unavailable: {reason}"),
            });
        }
    }
    let config = D::gemm_config(rt, dtype, options.config)?;
    // The direct kernel vectorises over B's columns only when they are contiguous: a B with
    // another column stride (a transposed weight in a backward pass) is packed first, which
    // costs k * n copies against m * k * n multiply-adds.
    if config.kernel == GemmKernel::Direct
        && lb.strides()[r - 1] != 1
        && n > 1
        && m >= PACK_MIN_ROWS
    {
        let packed = copy_strided(rt, b, lb)?;
        let packed_layout = Layout::contiguous(lb.shape().clone());
        return matmul(rt, options, a, la, &packed, &packed_layout);
    }
    let out = rt.alloc(dtype, outputs)?;
    let mut c_strides = vec![0isize; batch_dims.len()];
    let mut acc = (m * n) as isize;
    for d in (0..batch_dims.len()).rev() {
        c_strides[d] = acc;
        acc *= batch_dims[d] as isize;
    }
    let (sa, sb) = (la.strides(), lb.strides());
    // Batch dimensions simplified together; each run's innermost one is the batch count.
    let plan = MapPlan::new(
        batch_dims,
        [&sa[..r - 2], &sb[..r - 2], &c_strides],
        [la.offset(), lb.offset(), 0],
    );
    for (offsets, (len, strides)) in plan.runs() {
        let problem = GemmProblem {
            m,
            n,
            k,
            a: [
                offsets[0],
                sa[r - 2] as usize,
                sa[r - 1] as usize,
                strides[0] as usize,
            ],
            b: [
                offsets[1],
                sb[r - 2] as usize,
                sb[r - 1] as usize,
                strides[1] as usize,
            ],
            c_offset: offsets[2],
            batch: len,
        };
        let blas = match engine {
            GemmEngine::Tiled => None,
            GemmEngine::Auto if !rt.driver().blas_by_default() => None,
            GemmEngine::Auto | GemmEngine::Blas => {
                launch_blas(rt, options.allow_tf32, a, b, &out, &problem)
            }
        };
        match blas {
            Some(outcome) => outcome?,
            None => launch_kernel(rt, &config, a, b, &out, &problem)?,
        }
    }
    Ok(out)
}
