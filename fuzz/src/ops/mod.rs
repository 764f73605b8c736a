//! The table of operations: one entry per public API call the fuzzer exercises.
//!
//! # Adding an operation
//! New public API joins the fuzzer the day it lands: add one entry to the family file it
//! belongs to (or a new family file listed in [`table`]):
//!
//! ```ignore
//! op("Tensor::narrow", 8, &[T, AXIS, SIZE, SIZE], &[T], |c| {
//!     Ok(c.t(0)?.narrow(c.axis(1), c.size(2), c.size(3)).into())
//! })
//! .expect(|c, out| same_dtype(c, 0, out))
//! ```
//!
//! * the name is what the printed program shows; the weight is how often it is drawn;
//! * the argument kinds ([`ArgKind`]) say how each argument is drawn: register references,
//!   dims, axes, sizes, floats, parameters, file contents;
//! * the outputs are the registers it fills on success;
//! * the body calls the API and converts its `Result` with `.into()`; `?` on an accessor
//!   skips the step when an input register is empty;
//! * optionally `.work(..)` estimates the work (steps over [`FuzzBackend::WORK_BUDGET`] are
//!   skipped; the default counts the elements of the tensor arguments) and
//!   `.expect(..)` checks what the documentation promises of an `Ok` result (shape, dtype,
//!   values), beyond the invariants every result is checked for
//!   ([`crate::invariants::check_value`]).

pub mod autograd_ops;
pub mod backend_calls;
pub mod backward_reduction;
pub mod consistent;
pub mod deferred_units;
pub mod differential;
pub mod files;
pub mod indexing;
pub mod layers;
pub mod llama_ops;
pub mod math;
pub mod nn_ops;
pub mod optim;
pub mod pretrained_files;
pub mod run_files;
pub mod sampler_ops;
pub mod sharded_units;
pub mod tensors;
pub mod tokenizer_ops;
pub mod transformer;
pub mod views;

use crate::args::{ArgKind, Kind};
use crate::machine::{Ctx, Outcome, Skip, Value};
use crate::program::Sig;
use tessera_backend_example::ExampleBackend;
use tessera_core::{Backend, DType, Shape, Tensor};
use tessera_cpu::Cpu;

/// A backend the fuzzer runs programs on.
pub trait FuzzBackend: Backend {
    /// Work (roughly, elements touched) above which a step is skipped: the fuzzer looks for
    /// wrong answers to absurd requests, not for slow answers to expensive ones.
    const WORK_BUDGET: usize;
    /// A fresh backend value.
    fn create() -> Self;
}

impl FuzzBackend for Cpu {
    const WORK_BUDGET: usize = 1 << 24;
    fn create() -> Self {
        Cpu::new()
    }
}

/// The example backend reads every operand element by element through its layout: about
/// thirty times slower than the CPU backend, so its budget is smaller.
impl FuzzBackend for ExampleBackend {
    const WORK_BUDGET: usize = 1 << 19;
    fn create() -> Self {
        ExampleBackend::new()
    }
}

/// Runs an operation: `Ok(outcome)`, or `Err(Skip)` when it cannot run.
pub type Run<B> = fn(&mut Ctx<'_, B>) -> Result<Outcome<B>, Skip>;
/// Estimates the work of an operation.
pub type Work<B> = fn(&Ctx<'_, B>) -> Result<usize, Skip>;
/// Checks what the documentation promises of an `Ok` result.
pub type Expect<B> = fn(&Ctx<'_, B>, &[Value<B>]) -> Result<(), String>;

/// One entry of the table.
pub struct Op<B: Backend> {
    /// Name, weight, arguments and outputs.
    pub sig: Sig,
    /// The call.
    pub run: Run<B>,
    /// The work estimate, if not the default.
    pub work: Option<Work<B>>,
    /// The documented properties of an `Ok` result, if checked.
    pub expect: Option<Expect<B>>,
}

impl<B: Backend> Op<B> {
    /// Sets the work estimate.
    pub fn work(mut self, work: Work<B>) -> Self {
        self.work = Some(work);
        self
    }

    /// Sets the check of an `Ok` result.
    pub fn expect(mut self, expect: Expect<B>) -> Self {
        self.expect = Some(expect);
        self
    }

    /// Makes the operation one of the first steps of programs, drawn with weight `weight`
    /// (only for operations without register arguments).
    pub fn starter(mut self, weight: u32) -> Self {
        debug_assert!(!self.sig.args.iter().any(|a| matches!(a, ArgKind::Reg(_))));
        self.sig.starter = weight;
        self
    }
}

/// An entry of the table (see the module docs).
pub fn op<B: Backend>(
    name: &'static str,
    weight: u32,
    args: &'static [ArgKind],
    outputs: &'static [Kind],
    run: Run<B>,
) -> Op<B> {
    Op {
        sig: Sig {
            name,
            weight,
            args,
            outputs,
            starter: 0,
        },
        run,
        work: None,
        expect: None,
    }
}

/// Argument kinds, short: the table reads like a list of signatures.
pub mod kinds {
    use crate::args::{ArgKind, Kind};
    /// A tensor register.
    pub const T: ArgKind = ArgKind::Reg(Kind::Tensor);
    /// A variable register.
    pub const V: ArgKind = ArgKind::Reg(Kind::Var);
    /// A layer register.
    pub const L: ArgKind = ArgKind::Reg(Kind::Layer);
    /// An optimizer register.
    pub const O: ArgKind = ArgKind::Reg(Kind::Optim);
    /// See [`ArgKind::Dims`].
    pub const DIMS: ArgKind = ArgKind::Dims;
    /// See [`ArgKind::SmallDims`].
    pub const SMALL: ArgKind = ArgKind::SmallDims;
    /// See [`ArgKind::Axis`].
    pub const AXIS: ArgKind = ArgKind::Axis;
    /// See [`ArgKind::Axes`].
    pub const AXES: ArgKind = ArgKind::Axes;
    /// See [`ArgKind::Perm`].
    pub const PERM: ArgKind = ArgKind::Perm;
    /// See [`ArgKind::Size`].
    pub const SIZE: ArgKind = ArgKind::Size;
    /// See [`ArgKind::Float`].
    pub const F: ArgKind = ArgKind::Float;
    /// See [`ArgKind::DType`].
    pub const DT: ArgKind = ArgKind::DType;
    /// See [`ArgKind::Bool`].
    pub const B: ArgKind = ArgKind::Bool;
    /// See [`ArgKind::Seed`].
    pub const SEED: ArgKind = ArgKind::Seed;
    /// See [`ArgKind::Indices`].
    pub const IDX: ArgKind = ArgKind::Indices;
    /// See [`ArgKind::Conv`].
    pub const CONV: ArgKind = ArgKind::Conv;
    /// See [`ArgKind::Pool`].
    pub const POOL: ArgKind = ArgKind::Pool;
    /// See [`ArgKind::Bytes`].
    pub const BYTES: ArgKind = ArgKind::Bytes;
    /// See [`ArgKind::File`].
    pub const FILE: ArgKind = ArgKind::File;
    /// Output kinds.
    pub const OUT_T: &[Kind] = &[Kind::Tensor];
    /// Two tensor outputs.
    pub const OUT_TT: &[Kind] = &[Kind::Tensor, Kind::Tensor];
    /// One variable output.
    pub const OUT_V: &[Kind] = &[Kind::Var];
    /// One layer output.
    pub const OUT_L: &[Kind] = &[Kind::Layer];
    /// One optimizer output.
    pub const OUT_O: &[Kind] = &[Kind::Optim];
    /// No output.
    pub const NONE: &[Kind] = &[];
}

/// The whole table, for backend `B`. The order (and so every program) is the same for every
/// backend.
pub fn table<B: FuzzBackend>() -> Vec<Op<B>> {
    let mut t = Vec::new();
    t.extend(tensors::ops());
    t.extend(views::ops());
    t.extend(math::ops());
    t.extend(indexing::ops());
    t.extend(nn_ops::ops());
    t.extend(backend_calls::ops());
    t.extend(autograd_ops::ops());
    t.extend(layers::ops());
    t.extend(optim::ops());
    t.extend(files::ops());
    t.extend(run_files::ops());
    t.extend(sharded_units::ops());
    t.extend(deferred_units::ops());
    t.extend(sampler_ops::ops());
    t.extend(backward_reduction::ops());
    t.extend(consistent::ops());
    t.extend(differential::ops());
    t.extend(transformer::ops());
    t.extend(pretrained_files::ops());
    t.extend(tokenizer_ops::ops());
    t.extend(llama_ops::ops());
    t
}

/// The signatures of the table (what program generation needs).
pub fn sigs() -> Vec<Sig> {
    table::<Cpu>().into_iter().map(|o| o.sig).collect()
}

/// The work of one layer of a model beyond its elements: the tensors, autograd nodes and kernel
/// calls of building it and running its forward pass and loss. Measured on a GPT of 16,384
/// blocks of width 1: about 100 µs and 58 KiB per block, the cost of 2^14 elements or more, so
/// a model of a million tiny layers is over the budget, not an out-of-memory abort (the first
/// fuzz finding of 2026-12-06).
pub const LAYER_WORK: usize = 1 << 14;

/// The work of allocating `numel` elements: requests of 2^32 elements or more fail at once
/// (they exceed the child's memory limit, whatever the dtype), so they cost nothing; smaller
/// ones cost their size.
pub fn alloc_work(numel: usize) -> usize {
    if numel >= 1 << 32 {
        0
    } else {
        numel
    }
}

/// The element count of `dims`, saturating.
pub fn numel(dims: &[usize]) -> usize {
    Shape::new(dims).numel()
}

// ----- checks shared by the families -----

/// The single tensor output.
pub fn out_tensor<B: Backend>(out: &[Value<B>]) -> Result<&Tensor<B>, String> {
    match out.first() {
        Some(Value::Tensor(t)) => Ok(t),
        _ => Err("expected a tensor output".into()),
    }
}

/// The output has `dims` and `dtype`.
pub fn has<B: Backend>(out: &Tensor<B>, dims: &[usize], dtype: DType) -> Result<(), String> {
    if out.dims() != dims || out.dtype() != dtype {
        return Err(format!(
            "returned a {} tensor of shape {}, documented: {dtype} {}",
            out.dtype(),
            out.shape(),
            Shape::new(dims)
        ));
    }
    Ok(())
}

/// The output has the shape and dtype of tensor argument `i`.
pub fn like_input<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    i: usize,
    out: &[Value<B>],
) -> Result<(), String> {
    let x = c.t(i).map_err(|_| "input vanished".to_string())?;
    has(out_tensor(out)?, x.dims(), x.dtype())
}

/// The output has the dtype of tensor argument `i`.
pub fn same_dtype<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    i: usize,
    out: &[Value<B>],
) -> Result<(), String> {
    let x = c.t(i).map_err(|_| "input vanished".to_string())?;
    let o = out_tensor(out)?;
    if o.dtype() != x.dtype() {
        return Err(format!("dtype {} instead of {}", o.dtype(), x.dtype()));
    }
    Ok(())
}

/// `bool` comparing `a` and `b` element by element, NaN equal to NaN.
pub fn same_values(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}
