//! The error half of the contract: `Backend` methods are public, so a backend may be called
//! directly with operands `tensor-core` would have rejected, and must then return `Err`, never
//! panic and never compute something (`docs/BACKENDS.md` §1, `tensor-core/src/backend.rs`).
//!
//! Each row calls one method with bad operands, one fault at a time (everything else valid):
//! indices out of range (`index_select`, `gather`, `scatter_add`), layouts that overrun their
//! storage (a shape, an offset or a stride past the end, a storage shorter than the layout, an
//! empty one), dtypes the backend's `supports_dtype` rejects (`full`, `cast`, `random`),
//! operands of mismatched dtypes or shapes, and axes out of range. A row passes when every call
//! returns `Err`; it fails, naming the method and the fault, when one panics (caught with
//! `catch_unwind`) or returns `Ok`.
//!
//! A device that reports errors asynchronously (the GPU backends' error flag: an index out of
//! range is seen by the kernel, and reported by the next `synchronize` or read-back) may return
//! `Ok` from the call itself: an `Err` from the `synchronize` that follows counts as the call's.
//! The family synchronises before each call too, so that an error left pending by one call is
//! not credited to the next.

use std::panic::{catch_unwind, AssertUnwindSafe};
use tessera_core::direct as positional;
use tessera_core::{
    ArgReduceOp, AssignMode, Backend, BinaryOp, CmpOp, DType, Distribution, HostData, Layout,
    ReduceOp, Result, UnaryOp,
};

/// The method a row calls with bad operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorOp {
    /// `download` through a layout that overruns its storage.
    Download,
    /// `full` of an unsupported dtype.
    Full,
    /// `copy_strided` through a bad layout.
    CopyStrided,
    /// `assign` with a bad destination or source.
    Assign,
    /// `cast` through a bad layout or to an unsupported dtype.
    Cast,
    /// `unary` through a bad layout.
    Unary,
    /// `binary` with a bad operand.
    Binary,
    /// `compare` with a bad operand.
    Compare,
    /// `where_select` with a bad operand.
    WhereSelect,
    /// `reduce` through a bad layout or over an axis out of range.
    Reduce,
    /// `arg_reduce` through a bad layout, along an axis out of range or empty.
    ArgReduce,
    /// `matmul` with a bad operand.
    Matmul,
    /// `index_select` with an index out of range or a bad operand.
    IndexSelect,
    /// `gather` with an index out of range or a bad operand.
    Gather,
    /// `scatter_add` with an index out of range or a bad operand.
    ScatterAdd,
    /// `random` of a dtype it cannot draw.
    Random,
}

impl ErrorOp {
    /// Every row.
    pub const ALL: [ErrorOp; 16] = [
        ErrorOp::Download,
        ErrorOp::Full,
        ErrorOp::CopyStrided,
        ErrorOp::Assign,
        ErrorOp::Cast,
        ErrorOp::Unary,
        ErrorOp::Binary,
        ErrorOp::Compare,
        ErrorOp::WhereSelect,
        ErrorOp::Reduce,
        ErrorOp::ArgReduce,
        ErrorOp::Matmul,
        ErrorOp::IndexSelect,
        ErrorOp::Gather,
        ErrorOp::ScatterAdd,
        ErrorOp::Random,
    ];

    /// The `Backend` method's name.
    pub fn name(self) -> &'static str {
        match self {
            ErrorOp::Download => "download",
            ErrorOp::Full => "full",
            ErrorOp::CopyStrided => "copy_strided",
            ErrorOp::Assign => "assign",
            ErrorOp::Cast => "cast",
            ErrorOp::Unary => "unary",
            ErrorOp::Binary => "binary",
            ErrorOp::Compare => "compare",
            ErrorOp::WhereSelect => "where_select",
            ErrorOp::Reduce => "reduce",
            ErrorOp::ArgReduce => "arg_reduce",
            ErrorOp::Matmul => "matmul",
            ErrorOp::IndexSelect => "index_select",
            ErrorOp::Gather => "gather",
            ErrorOp::ScatterAdd => "scatter_add",
            ErrorOp::Random => "random",
        }
    }

    /// The dtypes (columns) the row runs in: the dtype of its operands.
    pub fn dtypes(self) -> Vec<DType> {
        let floats = vec![DType::F32, DType::F64, DType::F16, DType::BF16];
        match self {
            ErrorOp::Matmul | ErrorOp::Random => floats,
            ErrorOp::Reduce | ErrorOp::ScatterAdd => DType::ALL
                .into_iter()
                .filter(|&d| d != DType::Bool)
                .collect(),
            _ => DType::ALL.to_vec(),
        }
    }
}

/// One bad call: what is wrong with it, and the call.
struct BadCall<'a> {
    fault: String,
    call: Box<dyn Fn() -> Result<()> + 'a>,
}

fn bad<'a>(fault: impl Into<String>, call: impl Fn() -> Result<()> + 'a) -> BadCall<'a> {
    BadCall {
        fault: fault.into(),
        call: Box::new(call),
    }
}

/// The text of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(a panic without a message)".into())
}

/// A layout with explicit strides and offset (checked against a storage large enough, so that
/// it can then be handed a smaller one).
fn strided(shape: &[usize], strides: &[isize], offset: usize) -> Layout {
    Layout::strided(shape.to_vec(), strides.to_vec(), offset, usize::MAX / 4)
        .expect("a valid layout for a large storage")
}

/// Layouts of shape `[2, 3]` (or larger) that do not fit a storage, with that storage's
/// length: each overruns it a different way.
fn overrunning() -> Vec<(String, usize, Layout)> {
    vec![
        (
            "a layout of shape [2, 4] over a storage of 6 elements".into(),
            6,
            Layout::contiguous([2, 4]),
        ),
        (
            "a [2, 3] layout at offset 5 over a storage of 6 elements".into(),
            6,
            strided(&[2, 3], &[3, 1], 5),
        ),
        (
            "a [2, 3] layout with strides [4, 1] (last element 6) over a storage of 6 elements"
                .into(),
            6,
            strided(&[2, 3], &[4, 1], 0),
        ),
        (
            "a [2, 3] layout over a storage of 5 elements".into(),
            5,
            Layout::contiguous([2, 3]),
        ),
        (
            "a [2, 3] layout over an empty storage".into(),
            0,
            Layout::contiguous([2, 3]),
        ),
    ]
}

/// Another dtype than `dtype` the backend supports, preferring one of the same kind (float or
/// not) so that only the mismatch is wrong.
fn other_dtype<B: Backend>(dev: &B, dtype: DType) -> Option<DType> {
    let candidates = DType::ALL
        .into_iter()
        .filter(|&d| d != dtype && dev.supports_dtype(d));
    let same_kind = candidates
        .clone()
        .find(|d| d.is_float() == dtype.is_float());
    same_kind.or_else(|| candidates.into_iter().next())
}

/// A unary op defined for `dtype`.
fn unary_op(dtype: DType) -> UnaryOp {
    UnaryOp::ALL
        .into_iter()
        .find(|op| op.supports(dtype))
        .expect("every dtype has a unary op")
}

/// A binary op defined for `dtype`.
fn binary_op(dtype: DType) -> BinaryOp {
    BinaryOp::ALL
        .into_iter()
        .find(|op| op.supports(dtype))
        .expect("every dtype has a binary op")
}

/// The bad calls of `op` on operands of `dtype`.
fn bad_calls<'a, B: Backend>(dev: &'a B, op: ErrorOp, dtype: DType) -> Result<Vec<BadCall<'a>>> {
    let d = dtype;
    let full = move |n: usize, dt: DType| dev.full(n, dt, 1.0);
    let six = Layout::contiguous([2, 3]);
    let other = other_dtype(dev, d);
    let unsupported: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|&u| !dev.supports_dtype(u))
        .collect();
    let indices = move |values: Vec<i64>| dev.upload(HostData::I64(values));
    let mut calls: Vec<BadCall<'a>> = Vec::new();
    match op {
        ErrorOp::Download => {
            for (fault, len, layout) in overrunning() {
                let s = full(len, d)?;
                calls.push(bad(fault, move || {
                    positional::download(dev, &s, &layout).map(drop)
                }));
            }
        }
        ErrorOp::Full => {
            for u in unsupported {
                calls.push(bad(
                    format!("{u}, which supports_dtype rejects"),
                    move || dev.full(4, u, 1.0).map(drop),
                ));
            }
        }
        ErrorOp::CopyStrided => {
            for (fault, len, layout) in overrunning() {
                let s = full(len, d)?;
                calls.push(bad(fault, move || {
                    positional::copy_strided(dev, &s, &layout).map(drop)
                }));
            }
        }
        ErrorOp::Assign => {
            for mode in [AssignMode::Overwrite, AssignMode::Accumulate] {
                for (fault, len, layout) in overrunning() {
                    let src = full(6, d)?;
                    let layout2 = layout.clone();
                    calls.push(bad(
                        format!("{mode:?}: the destination is {fault}"),
                        move || {
                            let mut dst = full(len, d)?;
                            positional::assign(
                                dev,
                                (&mut dst, &layout2),
                                (&src, &Layout::contiguous([2, 3])),
                                mode,
                            )
                        },
                    ));
                    let src = full(len, d)?;
                    calls.push(bad(format!("{mode:?}: the source is {fault}"), move || {
                        let mut dst = full(6, d)?;
                        positional::assign(
                            dev,
                            (&mut dst, &Layout::contiguous([2, 3])),
                            (&src, &layout),
                            mode,
                        )
                    }));
                }
                if let Some(o) = other {
                    let src = full(6, o)?;
                    calls.push(bad(
                        format!("{mode:?}: a {o} source into a {d} destination"),
                        move || {
                            let mut dst = full(6, d)?;
                            let l = Layout::contiguous([2, 3]);
                            positional::assign(dev, (&mut dst, &l), (&src, &l), mode)
                        },
                    ));
                }
                let src = full(6, d)?;
                calls.push(bad(
                    format!("{mode:?}: a [3, 2] source into a [2, 3] destination"),
                    move || {
                        let mut dst = full(6, d)?;
                        positional::assign(
                            dev,
                            (&mut dst, &Layout::contiguous([2, 3])),
                            (&src, &Layout::contiguous([3, 2])),
                            mode,
                        )
                    },
                ));
            }
        }
        ErrorOp::Cast => {
            for (fault, len, layout) in overrunning() {
                let s = full(len, d)?;
                calls.push(bad(fault, move || {
                    positional::cast(dev, &s, &layout, d).map(drop)
                }));
            }
            for u in unsupported {
                let s = full(6, d)?;
                let l = six.clone();
                calls.push(bad(
                    format!("a cast to {u}, which supports_dtype rejects"),
                    move || positional::cast(dev, &s, &l, u).map(drop),
                ));
            }
        }
        ErrorOp::Unary => {
            let u = unary_op(d);
            for (fault, len, layout) in overrunning() {
                let s = full(len, d)?;
                calls.push(bad(format!("{u:?} on {fault}"), move || {
                    positional::unary(dev, u, &s, &layout).map(drop)
                }));
            }
        }
        ErrorOp::Binary | ErrorOp::Compare => {
            let call = move |a: &B::Storage, al: &Layout, b: &B::Storage, bl: &Layout| {
                if op == ErrorOp::Binary {
                    positional::binary(dev, binary_op(d), (a, al), (b, bl)).map(drop)
                } else {
                    positional::compare(dev, CmpOp::Lt, (a, al), (b, bl)).map(drop)
                }
            };
            for (fault, len, layout) in overrunning() {
                if layout.dims() != [2, 3] {
                    continue; // a shape mismatch, not only an overrun
                }
                let (good, short) = (full(6, d)?, full(len, d)?);
                let l = layout.clone();
                let (good2, short2) = (full(6, d)?, full(len, d)?);
                calls.push(bad(format!("lhs: {fault}"), move || {
                    call(&short, &l, &good, &Layout::contiguous([2, 3]))
                }));
                calls.push(bad(format!("rhs: {fault}"), move || {
                    call(&good2, &Layout::contiguous([2, 3]), &short2, &layout)
                }));
            }
            if let Some(o) = other {
                let (a, b) = (full(6, d)?, full(6, o)?);
                let l = six.clone();
                calls.push(bad(format!("lhs {d}, rhs {o}"), move || {
                    call(&a, &l, &b, &l)
                }));
            }
            let (a, b) = (full(6, d)?, full(6, d)?);
            calls.push(bad("lhs [2, 3], rhs [3, 2]", move || {
                call(
                    &a,
                    &Layout::contiguous([2, 3]),
                    &b,
                    &Layout::contiguous([3, 2]),
                )
            }));
        }
        ErrorOp::WhereSelect => {
            let l = six.clone();
            for (fault, len, layout) in overrunning() {
                if layout.dims() != [2, 3] {
                    continue;
                }
                for which in 0..3 {
                    let names = ["cond", "on_true", "on_false"];
                    let dtypes = [DType::Bool, d, d];
                    let storages = (0..3)
                        .map(|i| full(if i == which { len } else { 6 }, dtypes[i]))
                        .collect::<Result<Vec<_>>>()?;
                    let layouts: Vec<Layout> = (0..3)
                        .map(|i| {
                            if i == which {
                                layout.clone()
                            } else {
                                l.clone()
                            }
                        })
                        .collect();
                    calls.push(bad(format!("{}: {fault}", names[which]), move || {
                        positional::where_select(
                            dev,
                            (&storages[0], &layouts[0]),
                            (&storages[1], &layouts[1]),
                            (&storages[2], &layouts[2]),
                        )
                        .map(drop)
                    }));
                }
            }
            if d != DType::Bool {
                let (c, t, f) = (full(6, d)?, full(6, d)?, full(6, d)?);
                let l2 = l.clone();
                calls.push(bad(format!("a {d} condition"), move || {
                    positional::where_select(dev, (&c, &l2), (&t, &l2), (&f, &l2)).map(drop)
                }));
            }
            if let Some(o) = other {
                let (c, t, f) = (full(6, DType::Bool)?, full(6, d)?, full(6, o)?);
                let l2 = l.clone();
                calls.push(bad(format!("on_true {d}, on_false {o}"), move || {
                    positional::where_select(dev, (&c, &l2), (&t, &l2), (&f, &l2)).map(drop)
                }));
            }
            let (c, t, f) = (full(6, DType::Bool)?, full(6, d)?, full(6, d)?);
            calls.push(bad(
                "cond [2, 3], on_true [2, 3], on_false [3, 2]",
                move || {
                    let l = Layout::contiguous([2, 3]);
                    positional::where_select(
                        dev,
                        (&c, &l),
                        (&t, &l),
                        (&f, &Layout::contiguous([3, 2])),
                    )
                    .map(drop)
                },
            ));
        }
        ErrorOp::Reduce => {
            for (fault, len, layout) in overrunning() {
                let s = full(len, d)?;
                calls.push(bad(format!("sum over axis 1 of {fault}"), move || {
                    positional::reduce(dev, ReduceOp::Sum, &s, &layout, &[1]).map(drop)
                }));
            }
            let s = full(6, d)?;
            calls.push(bad("sum over axis 2 of a [2, 3] layout", move || {
                positional::reduce(dev, ReduceOp::Sum, &s, &Layout::contiguous([2, 3]), &[2])
                    .map(drop)
            }));
        }
        ErrorOp::ArgReduce => {
            for (fault, len, layout) in overrunning() {
                let s = full(len, d)?;
                calls.push(bad(format!("argmax along axis 1 of {fault}"), move || {
                    positional::arg_reduce(dev, ArgReduceOp::ArgMax, &s, &layout, 1).map(drop)
                }));
            }
            let s = full(6, d)?;
            calls.push(bad("argmax along axis 2 of a [2, 3] layout", move || {
                positional::arg_reduce(dev, ArgReduceOp::ArgMax, &s, &Layout::contiguous([2, 3]), 2)
                    .map(drop)
            }));
            let s = full(6, d)?;
            calls.push(bad(
                "argmax along the empty axis of a [2, 0] layout",
                move || {
                    positional::arg_reduce(
                        dev,
                        ArgReduceOp::ArgMax,
                        &s,
                        &Layout::contiguous([2, 0]),
                        1,
                    )
                    .map(drop)
                },
            ));
        }
        ErrorOp::Matmul => {
            let kn = Layout::contiguous([3, 2]);
            for (fault, len, layout) in overrunning() {
                if layout.dims() != [2, 3] {
                    continue;
                }
                let (short, good) = (full(len, d)?, full(6, d)?);
                let kn2 = kn.clone();
                calls.push(bad(format!("lhs: {fault}"), move || {
                    positional::matmul(dev, (&short, &layout), (&good, &kn2)).map(drop)
                }));
            }
            let (a, b) = (full(6, d)?, full(6, d)?);
            calls.push(bad(
                "lhs [2, 3], rhs [2, 3] (inner dimensions 3 and 2)",
                move || {
                    let l = Layout::contiguous([2, 3]);
                    positional::matmul(dev, (&a, &l), (&b, &l)).map(drop)
                },
            ));
            if let Some(o) = other.filter(|o| o.is_float()) {
                let (a, b) = (full(6, d)?, full(6, o)?);
                calls.push(bad(format!("lhs {d}, rhs {o}"), move || {
                    positional::matmul(
                        dev,
                        (&a, &Layout::contiguous([2, 3])),
                        (&b, &Layout::contiguous([3, 2])),
                    )
                    .map(drop)
                }));
            }
            let (a, b) = (full(6, d)?, full(6, d)?);
            calls.push(bad("lhs of rank 1", move || {
                positional::matmul(
                    dev,
                    (&a, &Layout::contiguous([6])),
                    (&b, &Layout::contiguous([6, 1])),
                )
                .map(drop)
            }));
        }
        ErrorOp::IndexSelect => {
            for (what, values) in [
                ("index 3 on an axis of size 3", vec![0, 3]),
                ("index i64::MAX on an axis of size 3", vec![i64::MAX, 0]),
            ] {
                let (x, i) = (full(6, d)?, indices(values)?);
                calls.push(bad(what, move || {
                    positional::index_select(
                        dev,
                        (&x, &Layout::contiguous([2, 3])),
                        1,
                        (&i, &Layout::contiguous([2])),
                    )
                    .map(drop)
                }));
            }
            for (fault, len, layout) in overrunning() {
                let (x, i) = (full(len, d)?, indices(vec![0, 1])?);
                calls.push(bad(format!("x: {fault}"), move || {
                    positional::index_select(dev, (&x, &layout), 1, (&i, &Layout::contiguous([2])))
                        .map(drop)
                }));
            }
            let (x, i) = (full(6, d)?, indices(vec![0, 1])?);
            calls.push(bad(
                "indices: a [3] layout over a storage of 2",
                move || {
                    positional::index_select(
                        dev,
                        (&x, &Layout::contiguous([2, 3])),
                        1,
                        (&i, &Layout::contiguous([3])),
                    )
                    .map(drop)
                },
            ));
            let (x, i) = (full(6, d)?, indices(vec![0, 1])?);
            calls.push(bad("axis 2 of a [2, 3] layout", move || {
                positional::index_select(
                    dev,
                    (&x, &Layout::contiguous([2, 3])),
                    2,
                    (&i, &Layout::contiguous([2])),
                )
                .map(drop)
            }));
            if let Some(f) = [DType::F32, DType::F64]
                .into_iter()
                .find(|&f| dev.supports_dtype(f))
            {
                let (x, i) = (full(6, d)?, full(2, f)?);
                calls.push(bad(format!("{f} indices"), move || {
                    positional::index_select(
                        dev,
                        (&x, &Layout::contiguous([2, 3])),
                        1,
                        (&i, &Layout::contiguous([2])),
                    )
                    .map(drop)
                }));
            }
        }
        ErrorOp::Gather | ErrorOp::ScatterAdd => {
            // `gather(x [2, 3], 1, indices [2, 2])`; `scatter_add(base [2, 3], 1, indices
            // [2, 2], src [2, 2])`.
            let call = move |x: &B::Storage, xl: &Layout, i: &B::Storage, il: &Layout, axis| {
                if op == ErrorOp::Gather {
                    positional::gather(dev, (x, xl), axis, (i, il)).map(drop)
                } else {
                    let src = full(il.numel(), d)?;
                    positional::scatter_add(
                        dev,
                        (x, xl),
                        axis,
                        (i, il),
                        (&src, &Layout::contiguous(il.shape().clone())),
                    )
                    .map(drop)
                }
            };
            let ok = || vec![0, 1, 2, 0];
            for (what, values) in [
                ("index 3 on an axis of size 3", vec![0, 1, 3, 0]),
                (
                    "index i64::MAX on an axis of size 3",
                    vec![0, i64::MAX, 1, 0],
                ),
            ] {
                let (x, i) = (full(6, d)?, indices(values)?);
                calls.push(bad(what, move || {
                    call(
                        &x,
                        &Layout::contiguous([2, 3]),
                        &i,
                        &Layout::contiguous([2, 2]),
                        1,
                    )
                }));
            }
            for (fault, len, layout) in overrunning() {
                let (x, i) = (full(len, d)?, indices(ok())?);
                calls.push(bad(format!("x: {fault}"), move || {
                    call(&x, &layout, &i, &Layout::contiguous([2, 2]), 1)
                }));
            }
            // Indices whose layout or shape does not fit (x is a valid [2, 3]): (fault, index
            // values, index layout, axis).
            let misfits: [(&str, Vec<i64>, Layout, usize); 4] = [
                (
                    "indices: a [2, 3] layout over a storage of 4",
                    ok(),
                    Layout::contiguous([2, 3]),
                    1,
                ),
                (
                    "indices [3, 2] for x [2, 3] along axis 1",
                    vec![0; 6],
                    Layout::contiguous([3, 2]),
                    1,
                ),
                (
                    "axis 2 of a [2, 3] layout",
                    ok(),
                    Layout::contiguous([2, 2]),
                    2,
                ),
                (
                    "indices of rank 1 for x of rank 2",
                    ok(),
                    Layout::contiguous([4]),
                    1,
                ),
            ];
            for (fault, values, il, axis) in misfits {
                let (x, i) = (full(6, d)?, indices(values)?);
                calls.push(bad(fault, move || {
                    call(&x, &Layout::contiguous([2, 3]), &i, &il, axis)
                }));
            }
            if op == ErrorOp::ScatterAdd {
                if let Some(o) = other {
                    let (x, i, src) = (full(6, d)?, indices(ok())?, full(4, o)?);
                    calls.push(bad(format!("base {d}, src {o}"), move || {
                        let il = Layout::contiguous([2, 2]);
                        positional::scatter_add(
                            dev,
                            (&x, &Layout::contiguous([2, 3])),
                            1,
                            (&i, &il),
                            (&src, &il),
                        )
                        .map(drop)
                    }));
                }
                let (x, i, src) = (full(6, d)?, indices(ok())?, full(4, d)?);
                calls.push(bad("src [4] for indices [2, 2]", move || {
                    positional::scatter_add(
                        dev,
                        (&x, &Layout::contiguous([2, 3])),
                        1,
                        (&i, &Layout::contiguous([2, 2])),
                        (&src, &Layout::contiguous([4])),
                    )
                    .map(drop)
                }));
            }
        }
        ErrorOp::Random => {
            let mut wrong: Vec<DType> = vec![DType::I64, DType::Bool];
            wrong.extend(unsupported.into_iter().filter(|u| u.is_float()));
            for u in wrong {
                let why = if u.is_float() {
                    "which supports_dtype rejects"
                } else {
                    "not a float"
                };
                calls.push(bad(format!("draws of {u} ({why})"), move || {
                    let uniform = Distribution::Uniform {
                        low: 0.0,
                        high: 1.0,
                    };
                    dev.random(uniform, 4, u, 7, 0).map(drop)
                }));
            }
        }
    }
    Ok(calls)
}

/// Checks that every bad call of `op` on `dtype` operands returns `Err`: the failures, one line
/// each naming the method and the fault, or `Ok`.
pub fn check<B: Backend>(dev: &B, op: ErrorOp, dtype: DType) -> std::result::Result<(), String> {
    let method = op.name();
    let calls = bad_calls(dev, op, dtype)
        .map_err(|e| format!("setting up the bad calls of `{method}` failed: {e}"))?;
    let mut failures = Vec::new();
    for BadCall { fault, call } in &calls {
        // Nothing pending from an earlier call; then the call, and an asynchronous report.
        let _ = catch_unwind(AssertUnwindSafe(|| dev.synchronize()));
        match catch_unwind(AssertUnwindSafe(|| call().and_then(|()| dev.synchronize()))) {
            Ok(Err(_)) => {}
            Ok(Ok(())) => failures.push(format!(
                "`{method}` returned Ok on {fault}, and the synchronize after it reported no \
                 error (the contract asks for an Err)"
            )),
            Err(panic) => failures.push(format!(
                "`{method}` panicked on {fault} (the contract asks for an Err): {}",
                panic_text(&*panic)
            )),
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n  "))
    }
}
