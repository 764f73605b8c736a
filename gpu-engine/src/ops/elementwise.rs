//! Element-wise primitives over strided operands: copy, assign, cast, unary, binary, compare and
//! where. Each is one kernel per [`MapPlan`] chunk (one chunk unless the simplified rank exceeds
//! `MAX_RANK`), reading operand `k` through its view and writing a fresh contiguous output.

use crate::checks::{check_dtype, check_same_dtype};
use crate::driver::{Driver, ModuleKey};
use crate::runtime::{Arg, Runtime};
use crate::storage::GpuStorage;
use crate::view::MapPlan;
use std::sync::Arc;
use tessera_core::{
    AssignMode, BackendStorage, BinaryOp, CmpOp, DType, Error, Layout, Result, UnaryOp,
};

/// Runs the map kernel `kernel` of `module` with the signature
/// `(n, in_0, view_0, ..., in_{N-1}, view_{N-1}, out, out_offset)` over `inputs`, which share
/// one shape, into a fresh contiguous storage of `out_dtype`.
pub(crate) fn map<D: Driver, const N: usize>(
    rt: &Arc<Runtime<D>>,
    module: &ModuleKey,
    kernel: &'static str,
    inputs: [(&GpuStorage<D>, &Layout); N],
    out_dtype: DType,
) -> Result<GpuStorage<D>> {
    let plan = MapPlan::from_layouts(inputs.map(|(_, l)| l));
    let out = rt.alloc(out_dtype, inputs[0].1.numel())?;
    for chunk in plan.chunks() {
        let mut args = Vec::with_capacity(2 * N + 3);
        args.push(Arg::I64(chunk.len as i64));
        for (k, (storage, _)) in inputs.iter().enumerate() {
            args.push(Arg::Buffer(*storage));
            args.push(Arg::View(chunk.views[k]));
        }
        args.push(Arg::Buffer(&out));
        args.push(Arg::I64(chunk.first as i64));
        rt.launch_1d(module, kernel, &args, chunk.len)?;
    }
    Ok(out)
}

/// A contiguous copy of the elements of `layout`.
pub(crate) fn copy_strided<D: Driver>(
    rt: &Arc<Runtime<D>>,
    x: &GpuStorage<D>,
    layout: &Layout,
) -> Result<GpuStorage<D>> {
    map(
        rt,
        &ModuleKey::tensor(x.dtype()),
        "copy",
        [(x, layout)],
        x.dtype(),
    )
}

/// `dst[dst_layout] = src[src_layout]` (or `+=`).
pub(crate) fn assign<D: Driver>(
    rt: &Arc<Runtime<D>>,
    dst: &GpuStorage<D>,
    dst_layout: &Layout,
    src: &GpuStorage<D>,
    src_layout: &Layout,
    mode: AssignMode,
) -> Result<()> {
    check_same_dtype("assign", dst, src)?;
    let kernel = match mode {
        AssignMode::Overwrite => "assign_set",
        AssignMode::Accumulate => "assign_add",
    };
    let module = ModuleKey::tensor(dst.dtype());
    let plan = MapPlan::from_layouts([dst_layout, src_layout]);
    for chunk in plan.chunks() {
        let args = [
            Arg::I64(chunk.len as i64),
            Arg::Buffer(dst),
            Arg::View(chunk.views[0]),
            Arg::Buffer(src),
            Arg::View(chunk.views[1]),
        ];
        rt.launch_1d(&module, kernel, &args, chunk.len)?;
    }
    Ok(())
}

/// Converts every element to `dtype`.
pub(crate) fn cast<D: Driver>(
    rt: &Arc<Runtime<D>>,
    x: &GpuStorage<D>,
    layout: &Layout,
    dtype: DType,
) -> Result<GpuStorage<D>> {
    if dtype == x.dtype() {
        return copy_strided(rt, x, layout);
    }
    let kernel = match dtype {
        DType::F32 => "cast_to_f32",
        DType::F64 => "cast_to_f64",
        DType::I64 => "cast_to_i64",
        DType::Bool => "cast_to_bool",
        DType::F16 => "cast_to_f16",
        DType::BF16 => "cast_to_bf16",
        other => {
            return Err(tessera_core::Error::UnsupportedDType {
                op: "cast",
                dtype: other,
            })
        }
    };
    map(
        rt,
        &ModuleKey::tensor(x.dtype()),
        kernel,
        [(x, layout)],
        dtype,
    )
}

/// The kernel of a unary op.
fn unary_kernel(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "unary_neg",
        UnaryOp::Abs => "unary_abs",
        UnaryOp::Sign => "unary_sign",
        UnaryOp::Square => "unary_square",
        UnaryOp::Recip => "unary_recip",
        UnaryOp::Sqrt => "unary_sqrt",
        UnaryOp::Exp => "unary_exp",
        UnaryOp::Log => "unary_log",
        UnaryOp::Sin => "unary_sin",
        UnaryOp::Cos => "unary_cos",
        UnaryOp::Tanh => "unary_tanh",
        UnaryOp::Sigmoid => "unary_sigmoid",
        UnaryOp::Relu => "unary_relu",
        UnaryOp::Gelu => "unary_gelu",
        UnaryOp::Erf => "unary_erf",
        UnaryOp::Floor => "unary_floor",
        UnaryOp::Ceil => "unary_ceil",
        UnaryOp::Not => "unary_not",
    }
}

/// Applies `op` to every element.
pub(crate) fn unary<D: Driver>(
    rt: &Arc<Runtime<D>>,
    op: UnaryOp,
    x: &GpuStorage<D>,
    layout: &Layout,
) -> Result<GpuStorage<D>> {
    if !op.supports(x.dtype()) {
        return Err(Error::UnsupportedDType {
            op: op.name(),
            dtype: x.dtype(),
        });
    }
    map(
        rt,
        &ModuleKey::tensor(x.dtype()),
        unary_kernel(op),
        [(x, layout)],
        x.dtype(),
    )
}

/// Applies `op` element by element.
pub(crate) fn binary<D: Driver>(
    rt: &Arc<Runtime<D>>,
    op: BinaryOp,
    a: &GpuStorage<D>,
    la: &Layout,
    b: &GpuStorage<D>,
    lb: &Layout,
) -> Result<GpuStorage<D>> {
    check_same_dtype(op.name(), a, b)?;
    if !op.supports(a.dtype()) {
        return Err(Error::UnsupportedDType {
            op: op.name(),
            dtype: a.dtype(),
        });
    }
    let kernel = match op {
        BinaryOp::Add => "binary_add",
        BinaryOp::Sub => "binary_sub",
        BinaryOp::Mul => "binary_mul",
        BinaryOp::Div => "binary_div",
        BinaryOp::Pow => "binary_pow",
        BinaryOp::Maximum => "binary_maximum",
        BinaryOp::Minimum => "binary_minimum",
    };
    map(
        rt,
        &ModuleKey::tensor(a.dtype()),
        kernel,
        [(a, la), (b, lb)],
        a.dtype(),
    )
}

/// Compares element by element into a bool storage.
pub(crate) fn compare<D: Driver>(
    rt: &Arc<Runtime<D>>,
    op: CmpOp,
    a: &GpuStorage<D>,
    la: &Layout,
    b: &GpuStorage<D>,
    lb: &Layout,
) -> Result<GpuStorage<D>> {
    check_same_dtype(op.name(), a, b)?;
    let kernel = match op {
        CmpOp::Eq => "cmp_eq",
        CmpOp::Ne => "cmp_ne",
        CmpOp::Lt => "cmp_lt",
        CmpOp::Le => "cmp_le",
        CmpOp::Gt => "cmp_gt",
        CmpOp::Ge => "cmp_ge",
    };
    map(
        rt,
        &ModuleKey::tensor(a.dtype()),
        kernel,
        [(a, la), (b, lb)],
        DType::Bool,
    )
}

/// `cond ? on_true : on_false` element by element.
pub(crate) fn where_select<D: Driver>(
    rt: &Arc<Runtime<D>>,
    cond: (&GpuStorage<D>, &Layout),
    on_true: (&GpuStorage<D>, &Layout),
    on_false: (&GpuStorage<D>, &Layout),
) -> Result<GpuStorage<D>> {
    check_dtype("where", cond.0, DType::Bool)?;
    check_same_dtype("where", on_true.0, on_false.0)?;
    let dtype = on_true.0.dtype();
    map(
        rt,
        &ModuleKey::tensor(dtype),
        "where_select",
        [cond, on_true, on_false],
        dtype,
    )
}
