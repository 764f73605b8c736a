//! Element-wise primitives over strided operands: copy, assign, cast, unary, binary, compare and
//! where. Each is one kernel per [`MapPlan`] chunk (one chunk unless the simplified rank exceeds
//! `MAX_RANK`), reading operand `k` through its view and writing a fresh contiguous output.

use crate::checks::{check_same_dtype, check_same_shape};
use crate::runtime::{Arg, ProgramKey, Runtime};
use crate::storage::OpenClStorage;
use crate::view::MapPlan;
use std::sync::Arc;
use tensor_core::{
    AssignMode, BackendStorage, BinaryOp, CmpOp, DType, Error, Layout, Result, UnaryOp,
};

/// Runs the map kernel `kernel` of `key` with the signature
/// `(n, in_0, view_0, ..., in_{N-1}, view_{N-1}, out, out_offset)` over `inputs`, which share
/// one shape, into a fresh contiguous storage of `out_dtype`.
pub(crate) fn map<const N: usize>(
    rt: &Arc<Runtime>,
    key: &ProgramKey,
    kernel: &'static str,
    inputs: [(&OpenClStorage, &Layout); N],
    out_dtype: DType,
) -> Result<OpenClStorage> {
    let plan = MapPlan::from_layouts(inputs.map(|(_, l)| l));
    let out = rt.alloc(out_dtype, inputs[0].1.numel())?;
    for chunk in plan.chunks() {
        let mut args = Vec::with_capacity(2 * N + 3);
        args.push(Arg::I64(chunk.len as i64));
        for (k, (storage, _)) in inputs.iter().enumerate() {
            args.push(Arg::Buffer(storage));
            args.push(Arg::View(chunk.views[k]));
        }
        args.push(Arg::Buffer(&out));
        args.push(Arg::I64(chunk.first as i64));
        rt.launch_1d(key, kernel, &args, chunk.len)?;
    }
    Ok(out)
}

/// A contiguous copy of the elements of `layout`.
pub(crate) fn copy_strided(
    rt: &Arc<Runtime>,
    x: &OpenClStorage,
    layout: &Layout,
) -> Result<OpenClStorage> {
    map(
        rt,
        &ProgramKey::tensor(x.dtype()),
        "copy",
        [(x, layout)],
        x.dtype(),
    )
}

/// `dst[dst_layout] = src[src_layout]` (or `+=`).
pub(crate) fn assign(
    rt: &Arc<Runtime>,
    dst: &OpenClStorage,
    dst_layout: &Layout,
    src: &OpenClStorage,
    src_layout: &Layout,
    mode: AssignMode,
) -> Result<()> {
    check_same_shape("assign", dst_layout, src_layout)?;
    check_same_dtype("assign", dst, src)?;
    let kernel = match mode {
        AssignMode::Overwrite => "assign_set",
        AssignMode::Accumulate => "assign_add",
    };
    let key = ProgramKey::tensor(dst.dtype());
    let plan = MapPlan::from_layouts([dst_layout, src_layout]);
    for chunk in plan.chunks() {
        let args = [
            Arg::I64(chunk.len as i64),
            Arg::Buffer(dst),
            Arg::View(chunk.views[0]),
            Arg::Buffer(src),
            Arg::View(chunk.views[1]),
        ];
        rt.launch_1d(&key, kernel, &args, chunk.len)?;
    }
    Ok(())
}

/// Converts every element to `dtype`.
pub(crate) fn cast(
    rt: &Arc<Runtime>,
    x: &OpenClStorage,
    layout: &Layout,
    dtype: DType,
) -> Result<OpenClStorage> {
    if dtype == x.dtype() {
        return copy_strided(rt, x, layout);
    }
    if dtype == DType::F64 && !rt.info.has_fp64 {
        return Err(Error::UnsupportedDType { op: "cast", dtype });
    }
    let kernel = match dtype {
        DType::F32 => "cast_to_f32",
        DType::F64 => "cast_to_f64",
        DType::I64 => "cast_to_i64",
        DType::Bool => "cast_to_bool",
    };
    map(
        rt,
        &ProgramKey::tensor(x.dtype()),
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
pub(crate) fn unary(
    rt: &Arc<Runtime>,
    op: UnaryOp,
    x: &OpenClStorage,
    layout: &Layout,
) -> Result<OpenClStorage> {
    if !op.supports(x.dtype()) {
        return Err(Error::UnsupportedDType {
            op: op.name(),
            dtype: x.dtype(),
        });
    }
    map(
        rt,
        &ProgramKey::tensor(x.dtype()),
        unary_kernel(op),
        [(x, layout)],
        x.dtype(),
    )
}

/// Applies `op` element by element.
pub(crate) fn binary(
    rt: &Arc<Runtime>,
    op: BinaryOp,
    a: &OpenClStorage,
    la: &Layout,
    b: &OpenClStorage,
    lb: &Layout,
) -> Result<OpenClStorage> {
    check_same_shape(op.name(), la, lb)?;
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
        &ProgramKey::tensor(a.dtype()),
        kernel,
        [(a, la), (b, lb)],
        a.dtype(),
    )
}

/// Compares element by element into a bool storage.
pub(crate) fn compare(
    rt: &Arc<Runtime>,
    op: CmpOp,
    a: &OpenClStorage,
    la: &Layout,
    b: &OpenClStorage,
    lb: &Layout,
) -> Result<OpenClStorage> {
    check_same_shape(op.name(), la, lb)?;
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
        &ProgramKey::tensor(a.dtype()),
        kernel,
        [(a, la), (b, lb)],
        DType::Bool,
    )
}

/// `cond ? on_true : on_false` element by element.
pub(crate) fn where_select(
    rt: &Arc<Runtime>,
    cond: (&OpenClStorage, &Layout),
    on_true: (&OpenClStorage, &Layout),
    on_false: (&OpenClStorage, &Layout),
) -> Result<OpenClStorage> {
    crate::checks::check_dtype("where", cond.0, DType::Bool)?;
    check_same_dtype("where", on_true.0, on_false.0)?;
    check_same_shape("where", cond.1, on_true.1)?;
    check_same_shape("where", cond.1, on_false.1)?;
    let dtype = on_true.0.dtype();
    map(
        rt,
        &ProgramKey::tensor(dtype),
        "where_select",
        [cond, on_true, on_false],
        dtype,
    )
}
