//! Calling a backend's primitives directly from storages and layouts (tests, fuzzers, code
//! that holds raw parts): each function builds the operand types of [`crate::operand`] on the
//! way and calls the primitive, with no 16-bit rule (see [`crate::dispatch`] for that). A
//! layout that does not fit is an error from the operand's construction; everything past it
//! (dtypes, index values, axes, allocation) is the backend's to report.

use crate::operand::{
    Assignment, Gather, IndexSelect, MatmulOperands, Operand, OperandMut, SameShape, ScatterAdd,
};
use crate::{
    ArgReduceOp, AssignMode, Backend, BinaryOp, CmpOp, DType, HostData, Layout, ReduceOp, Result,
    UnaryOp,
};

type Pair<'a, B> = (&'a <B as Backend>::Storage, &'a Layout);

fn operand<'a, B: Backend>(
    op: &'static str,
    (s, l): Pair<'a, B>,
) -> Result<Operand<'a, B::Storage>> {
    Operand::new(op, s, l)
}

/// [`Backend::download`].
pub fn download<B: Backend>(dev: &B, s: &B::Storage, l: &Layout) -> Result<HostData> {
    dev.download(operand::<B>("download", (s, l))?)
}

/// [`Backend::copy_strided`].
pub fn copy_strided<B: Backend>(dev: &B, s: &B::Storage, l: &Layout) -> Result<B::Storage> {
    dev.copy_strided(operand::<B>("copy_strided", (s, l))?)
}

/// [`Backend::assign`].
pub fn assign<B: Backend>(
    dev: &B,
    dst: (&mut B::Storage, &Layout),
    src: Pair<'_, B>,
    mode: AssignMode,
) -> Result<()> {
    let dst = OperandMut::new("assign", dst.0, dst.1)?;
    let src = operand::<B>("assign", src)?;
    dev.assign(Assignment::new("assign", dst, src)?, mode)
}

/// [`Backend::cast`].
pub fn cast<B: Backend>(dev: &B, s: &B::Storage, l: &Layout, dtype: DType) -> Result<B::Storage> {
    dev.cast(operand::<B>("cast", (s, l))?, dtype)
}

/// [`Backend::unary`].
pub fn unary<B: Backend>(dev: &B, op: UnaryOp, s: &B::Storage, l: &Layout) -> Result<B::Storage> {
    dev.unary(op, operand::<B>(op.name(), (s, l))?)
}

/// [`Backend::binary`].
pub fn binary<B: Backend>(
    dev: &B,
    op: BinaryOp,
    a: Pair<'_, B>,
    b: Pair<'_, B>,
) -> Result<B::Storage> {
    let xs = [operand::<B>(op.name(), a)?, operand::<B>(op.name(), b)?];
    dev.binary(op, SameShape::new(op.name(), xs)?)
}

/// [`Backend::compare`].
pub fn compare<B: Backend>(
    dev: &B,
    op: CmpOp,
    a: Pair<'_, B>,
    b: Pair<'_, B>,
) -> Result<B::Storage> {
    let xs = [operand::<B>(op.name(), a)?, operand::<B>(op.name(), b)?];
    dev.compare(op, SameShape::new(op.name(), xs)?)
}

/// [`Backend::where_select`].
pub fn where_select<B: Backend>(
    dev: &B,
    cond: Pair<'_, B>,
    on_true: Pair<'_, B>,
    on_false: Pair<'_, B>,
) -> Result<B::Storage> {
    let xs = [
        operand::<B>("where", cond)?,
        operand::<B>("where", on_true)?,
        operand::<B>("where", on_false)?,
    ];
    dev.where_select(SameShape::new("where", xs)?)
}

/// [`Backend::reduce`].
pub fn reduce<B: Backend>(
    dev: &B,
    op: ReduceOp,
    s: &B::Storage,
    l: &Layout,
    axes: &[usize],
) -> Result<B::Storage> {
    dev.reduce(op, operand::<B>(op.name(), (s, l))?, axes)
}

/// [`Backend::arg_reduce`].
pub fn arg_reduce<B: Backend>(
    dev: &B,
    op: ArgReduceOp,
    s: &B::Storage,
    l: &Layout,
    axis: usize,
) -> Result<B::Storage> {
    dev.arg_reduce(op, operand::<B>(op.name(), (s, l))?, axis)
}

/// [`Backend::matmul`].
pub fn matmul<B: Backend>(dev: &B, a: Pair<'_, B>, b: Pair<'_, B>) -> Result<B::Storage> {
    let xs = MatmulOperands::new(operand::<B>("matmul", a)?, operand::<B>("matmul", b)?)?;
    dev.matmul(xs)
}

/// [`Backend::index_select`].
pub fn index_select<B: Backend>(
    dev: &B,
    x: Pair<'_, B>,
    axis: usize,
    indices: Pair<'_, B>,
) -> Result<B::Storage> {
    const OP: &str = "index_select";
    let xs = IndexSelect::new(operand::<B>(OP, x)?, axis, operand::<B>(OP, indices)?)?;
    dev.index_select(xs)
}

/// [`Backend::gather`].
pub fn gather<B: Backend>(
    dev: &B,
    x: Pair<'_, B>,
    axis: usize,
    indices: Pair<'_, B>,
) -> Result<B::Storage> {
    let xs = Gather::new(
        operand::<B>("gather", x)?,
        axis,
        operand::<B>("gather", indices)?,
    )?;
    dev.gather(xs)
}

/// [`Backend::scatter_add`].
pub fn scatter_add<B: Backend>(
    dev: &B,
    base: Pair<'_, B>,
    axis: usize,
    indices: Pair<'_, B>,
    src: Pair<'_, B>,
) -> Result<B::Storage> {
    const OP: &str = "scatter_add";
    let (base, indices, src) = (
        operand::<B>(OP, base)?,
        operand::<B>(OP, indices)?,
        operand::<B>(OP, src)?,
    );
    dev.scatter_add(ScatterAdd::new(base, axis, indices, src)?)
}
