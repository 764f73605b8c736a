//! Batched matrix products through the tiled GEMM kernel (`gemm.cl.c`).
//!
//! Operands are used in place whatever their strides (transposed or broadcast batches need no
//! copy). The batch dimensions of A, B and the contiguous C are simplified together; if more
//! than one batch dimension remains, each index of the outer ones gets its own launch.

use crate::autotune::{gemm_config, GemmConfig, GemmKernel};
use crate::checks::check_same_dtype;
use crate::ops::elementwise::copy_strided;
use crate::ops::transfer::full;
use crate::runtime::{Arg, ProgramKey, Runtime};
use crate::storage::OpenClStorage;
use crate::view::MapPlan;
use std::sync::Arc;
use tensor_core::kernels::{GemmTiles, Program};
use tensor_core::{BackendStorage, DType, Error, Layout, Result};

/// Rows of A from which a B with non-unit column stride is packed for the direct kernel.
const PACK_MIN_ROWS: usize = 8;

/// The program key of the GEMM kernel for `dtype` and `tiles`.
pub(crate) fn gemm_key(dtype: DType, tiles: &GemmTiles) -> ProgramKey {
    ProgramKey {
        program: Program::Gemm,
        dtype,
        extra_defines: tiles.defines(),
    }
}

/// One GEMM problem: `batch` products of `m x k` by `k x n` matrices.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmProblem {
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    /// A: offset, row stride, column stride, batch stride.
    pub(crate) a: [usize; 4],
    /// B: offset, row stride, column stride, batch stride.
    pub(crate) b: [usize; 4],
    /// Offset of the first C element (C batches are `m * n` apart).
    pub(crate) c_offset: usize,
    pub(crate) batch: usize,
}

/// Enqueues `problem` with `config`.
pub(crate) fn launch_gemm(
    rt: &Runtime,
    config: &GemmConfig,
    a: &OpenClStorage,
    b: &OpenClStorage,
    c: &OpenClStorage,
    p: &GemmProblem,
) -> Result<()> {
    let tiles = &config.tiles;
    let (wx, wy) = tiles.work_group();
    let global = [
        p.n.div_ceil(tiles.bn) * wx,
        p.m.div_ceil(tiles.bm) * wy,
        p.batch,
    ];
    let i = |v: usize| Arg::I64(v as i64);
    let args = [
        i(p.m),
        i(p.n),
        i(p.k),
        Arg::Buffer(a),
        i(p.a[0]),
        i(p.a[1]),
        i(p.a[2]),
        i(p.a[3]),
        Arg::Buffer(b),
        i(p.b[0]),
        i(p.b[1]),
        i(p.b[2]),
        i(p.b[3]),
        Arg::Buffer(c),
        i(p.c_offset),
    ];
    rt.launch(
        &gemm_key(a.dtype(), tiles),
        config.kernel.name(),
        &args,
        &global,
        &[wx, wy, 1],
    )
}

/// `[..batch, m, k] x [..batch, k, n] -> [..batch, m, n]`, f32 or f64.
pub(crate) fn matmul(
    rt: &Arc<Runtime>,
    a: &OpenClStorage,
    la: &Layout,
    b: &OpenClStorage,
    lb: &Layout,
) -> Result<OpenClStorage> {
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
    let mismatch = || Error::MatmulShape {
        lhs: la.shape().clone(),
        rhs: lb.shape().clone(),
    };
    if r < 2 || db.len() != r || da[..r - 2] != db[..r - 2] || da[r - 1] != db[r - 2] {
        return Err(mismatch());
    }
    let (m, k, n) = (da[r - 2], da[r - 1], db[r - 1]);
    let batch_dims = &da[..r - 2];
    let batch: usize = batch_dims.iter().product();
    if batch * m * n == 0 || k == 0 {
        return full(rt, batch * m * n, dtype, 0.0);
    }
    let config = gemm_config(rt, dtype)?;
    // The direct kernel vectorises over B's columns only when they are contiguous: a B with
    // another column stride (a transposed weight in a backward pass) is packed first, which
    // costs k * n copies against m * k * n multiply-adds.
    if config.kernel == GemmKernel::Direct
        && lb.strides()[r - 1] != 1
        && n > 1
        && m >= PACK_MIN_ROWS
    {
        let packed = copy_strided(rt, b, lb)?;
        return matmul(rt, a, la, &packed, &Layout::contiguous(lb.shape().clone()));
    }
    let out = rt.alloc(dtype, batch * m * n)?;
    let c_strides: Vec<isize> = {
        let mut s = vec![0isize; batch_dims.len()];
        let mut acc = (m * n) as isize;
        for d in (0..batch_dims.len()).rev() {
            s[d] = acc;
            acc *= batch_dims[d] as isize;
        }
        s
    };
    let (sa, sb) = (la.strides(), lb.strides());
    // Batch dimensions simplified together; each chunk's innermost one becomes the grid's z.
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
        launch_gemm(rt, &config, a, b, &out, &problem)?;
    }
    Ok(out)
}
