//! Running a program in this process: the registers, the context an operation reads its
//! arguments from, and one step under `catch_unwind` with the invariants of its results
//! checked.

use crate::args::{Arg, BytesRecipe, Kind};
use crate::invariants::check_value;
use crate::ops::{FuzzBackend, Op};
use crate::program::{Program, Step};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use tessera_autograd::Var;
use tessera_core::{Conv2dParams, DType, Pool2dParams, Tensor};
use tessera_nn::optim::Optimizer;
use tessera_nn::Forward;

/// An `nn` layer with the work one input element costs it (for the budget).
pub struct Layer<B: tessera_core::Backend> {
    /// The layer.
    pub module: Box<dyn Forward<B>>,
    /// Work per input element of a forward pass (e.g. a Linear layer's output features).
    pub cost_per_input: usize,
}

/// A value in a register.
pub enum Value<B: tessera_core::Backend> {
    /// A tensor.
    Tensor(Tensor<B>),
    /// An autograd variable.
    Var(Var<B>),
    /// A layer.
    Layer(Layer<B>),
    /// An optimizer.
    Optim(Box<dyn Optimizer<B>>),
}

impl<B: tessera_core::Backend> Value<B> {
    fn kind(&self) -> Kind {
        match self {
            Value::Tensor(_) => Kind::Tensor,
            Value::Var(_) => Kind::Var,
            Value::Layer(_) => Kind::Layer,
            Value::Optim(_) => Kind::Optim,
        }
    }
}

/// Why a step did not run: an input register is empty (its step failed) or the step is over
/// the work budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skip(pub &'static str);

/// What an operation returned: values for its output registers, or the error the API
/// returned (the expected outcome of most fuzzed calls: a typed error, not a panic).
pub enum Outcome<B: tessera_core::Backend> {
    /// Success, with the values of the step's outputs (possibly none).
    Ok(Vec<Value<B>>),
    /// The API returned an error; the message is kept for the statistics.
    Err(String),
    /// The call returned, but a property the operation checks itself (a round trip, a file
    /// left behind) does not hold.
    Break(String),
}

/// Values an operation can return on success.
pub trait IntoValues<B: tessera_core::Backend> {
    /// The values, in output order.
    fn into_values(self) -> Vec<Value<B>>;
}

impl<B: tessera_core::Backend> IntoValues<B> for () {
    fn into_values(self) -> Vec<Value<B>> {
        Vec::new()
    }
}

impl<B: tessera_core::Backend> IntoValues<B> for Tensor<B> {
    fn into_values(self) -> Vec<Value<B>> {
        vec![Value::Tensor(self)]
    }
}

impl<B: tessera_core::Backend> IntoValues<B> for (Tensor<B>, Tensor<B>) {
    fn into_values(self) -> Vec<Value<B>> {
        vec![Value::Tensor(self.0), Value::Tensor(self.1)]
    }
}

impl<B: tessera_core::Backend> IntoValues<B> for (Tensor<B>, Tensor<B>, Tensor<B>) {
    fn into_values(self) -> Vec<Value<B>> {
        vec![
            Value::Tensor(self.0),
            Value::Tensor(self.1),
            Value::Tensor(self.2),
        ]
    }
}

impl<B: tessera_core::Backend> IntoValues<B> for Var<B> {
    fn into_values(self) -> Vec<Value<B>> {
        vec![Value::Var(self)]
    }
}

impl<B: tessera_core::Backend> IntoValues<B> for Layer<B> {
    fn into_values(self) -> Vec<Value<B>> {
        vec![Value::Layer(self)]
    }
}

impl<B: tessera_core::Backend> IntoValues<B> for Box<dyn Optimizer<B>> {
    fn into_values(self) -> Vec<Value<B>> {
        vec![Value::Optim(self)]
    }
}

impl<B: tessera_core::Backend, T: IntoValues<B>, E: fmt::Display> From<Result<T, E>>
    for Outcome<B>
{
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(v) => Outcome::Ok(v.into_values()),
            Err(e) => Outcome::Err(e.to_string()),
        }
    }
}

/// The registers and scratch files of a running program.
pub struct Machine<B: tessera_core::Backend> {
    backend: B,
    regs: Vec<Vec<Option<Value<B>>>>,
    dir: PathBuf,
}

fn slot(kind: Kind) -> usize {
    match kind {
        Kind::Tensor => 0,
        Kind::Var => 1,
        Kind::Layer => 2,
        Kind::Optim => 3,
    }
}

/// What an operation sees: the machine and the step's arguments, with typed accessors. An
/// accessor of an empty register returns [`Skip`]; an accessor of the wrong kind is a bug of
/// the table and panics (reported like any panic, naming the operation).
pub struct Ctx<'a, B: tessera_core::Backend> {
    machine: &'a mut Machine<B>,
    args: &'a [Arg],
}

impl<'a, B: FuzzBackend> Ctx<'a, B> {
    fn arg(&self, i: usize) -> &Arg {
        &self.args[i]
    }

    fn reg(&self, i: usize, kind: Kind) -> Result<&Value<B>, Skip> {
        match self.arg(i) {
            Arg::Reg(k, r) if *k == kind => self.machine.regs[slot(kind)][*r]
                .as_ref()
                .ok_or(Skip("an input is missing")),
            other => panic!("fuzz table bug: argument {i} is {other:?}, not a {kind:?}"),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.machine.backend
    }

    /// Tensor argument `i`.
    pub fn t(&self, i: usize) -> Result<Tensor<B>, Skip> {
        match self.reg(i, Kind::Tensor)? {
            Value::Tensor(t) => Ok(t.clone()),
            _ => unreachable!("registers hold their kind"),
        }
    }

    /// Variable argument `i`.
    pub fn v(&self, i: usize) -> Result<Var<B>, Skip> {
        match self.reg(i, Kind::Var)? {
            Value::Var(v) => Ok(v.clone()),
            _ => unreachable!("registers hold their kind"),
        }
    }

    /// Layer argument `i`.
    pub fn layer(&self, i: usize) -> Result<&Layer<B>, Skip> {
        match self.reg(i, Kind::Layer)? {
            Value::Layer(l) => Ok(l),
            _ => unreachable!("registers hold their kind"),
        }
    }

    /// Optimizer argument `i`, mutably.
    pub fn optim(&mut self, i: usize) -> Result<&mut Box<dyn Optimizer<B>>, Skip> {
        let Arg::Reg(Kind::Optim, r) = self.args[i] else {
            panic!("fuzz table bug: argument {i} is not an optimizer");
        };
        match self.machine.regs[slot(Kind::Optim)][r].as_mut() {
            Some(Value::Optim(o)) => Ok(o),
            Some(_) => unreachable!("registers hold their kind"),
            None => Err(Skip("an input is missing")),
        }
    }

    /// Every tensor in the registers (for checkpoint saves), with its register number.
    pub fn all_tensors(&self) -> Vec<(usize, Tensor<B>)> {
        self.machine.regs[slot(Kind::Tensor)]
            .iter()
            .enumerate()
            .filter_map(|(i, v)| match v {
                Some(Value::Tensor(t)) => Some((i, t.clone())),
                _ => None,
            })
            .collect()
    }

    /// Dims argument `i`.
    pub fn dims(&self, i: usize) -> Vec<usize> {
        match self.arg(i) {
            Arg::Dims(d) | Arg::Perm(d) => d.clone(),
            other => panic!("fuzz table bug: argument {i} is {other:?}, not dims"),
        }
    }

    /// Axis argument `i`.
    pub fn axis(&self, i: usize) -> isize {
        match self.arg(i) {
            Arg::Axis(a) => *a,
            other => panic!("fuzz table bug: argument {i} is {other:?}, not an axis"),
        }
    }

    /// Axes argument `i`.
    pub fn axes(&self, i: usize) -> Vec<isize> {
        match self.arg(i) {
            Arg::Axes(a) => a.clone(),
            other => panic!("fuzz table bug: argument {i} is {other:?}, not axes"),
        }
    }

    /// Size argument `i`.
    pub fn size(&self, i: usize) -> usize {
        match self.arg(i) {
            Arg::Size(s) => *s,
            other => panic!("fuzz table bug: argument {i} is {other:?}, not a size"),
        }
    }

    /// Float argument `i`.
    pub fn float(&self, i: usize) -> f64 {
        match self.arg(i) {
            Arg::Float(x) => *x,
            other => panic!("fuzz table bug: argument {i} is {other:?}, not a float"),
        }
    }

    /// Dtype argument `i`.
    pub fn dtype(&self, i: usize) -> DType {
        match self.arg(i) {
            Arg::DType(d) => *d,
            other => panic!("fuzz table bug: argument {i} is {other:?}, not a dtype"),
        }
    }

    /// Flag argument `i`.
    pub fn flag(&self, i: usize) -> bool {
        match self.arg(i) {
            Arg::Bool(b) => *b,
            other => panic!("fuzz table bug: argument {i} is {other:?}, not a flag"),
        }
    }

    /// Seed argument `i`.
    pub fn seed(&self, i: usize) -> u64 {
        match self.arg(i) {
            Arg::Seed(s) => *s,
            other => panic!("fuzz table bug: argument {i} is {other:?}, not a seed"),
        }
    }

    /// Index-values argument `i`.
    pub fn indices(&self, i: usize) -> Vec<i64> {
        match self.arg(i) {
            Arg::Indices(v) => v.clone(),
            other => panic!("fuzz table bug: argument {i} is {other:?}, not indices"),
        }
    }

    /// Convolution-parameters argument `i`.
    pub fn conv(&self, i: usize) -> Conv2dParams {
        match self.arg(i) {
            Arg::Conv(p) => *p,
            other => panic!("fuzz table bug: argument {i} is {other:?}, not conv params"),
        }
    }

    /// Pooling-parameters argument `i`.
    pub fn pool(&self, i: usize) -> Pool2dParams {
        match self.arg(i) {
            Arg::Pool(p) => *p,
            other => panic!("fuzz table bug: argument {i} is {other:?}, not pool params"),
        }
    }

    /// Bytes argument `i`.
    pub fn bytes(&self, i: usize) -> BytesRecipe {
        match self.arg(i) {
            Arg::Bytes(r) => *r,
            other => panic!("fuzz table bug: argument {i} is {other:?}, not bytes"),
        }
    }

    /// The path of file argument `i` (inside the program's scratch folder).
    pub fn file(&self, i: usize) -> PathBuf {
        match self.arg(i) {
            Arg::File(n) => self.machine.dir.join(format!("file{n}")),
            other => panic!("fuzz table bug: argument {i} is {other:?}, not a file"),
        }
    }

    /// The program's scratch folder.
    pub fn dir(&self) -> &Path {
        &self.machine.dir
    }

    /// The default work estimate: the elements of every tensor or variable argument, plus
    /// what the layers charge per input element.
    pub fn input_work(&self) -> usize {
        let mut work = 0usize;
        let mut per_element = 1usize;
        for (i, arg) in self.args.iter().enumerate() {
            let n = match arg {
                Arg::Reg(Kind::Tensor, _) => self.t(i).map(|t| t.numel()).unwrap_or(0),
                Arg::Reg(Kind::Var, _) => self.v(i).map(|v| v.numel()).unwrap_or(0),
                Arg::Reg(Kind::Layer, _) => {
                    if let Ok(l) = self.layer(i) {
                        per_element = per_element.saturating_mul(l.cost_per_input.max(1));
                    }
                    0
                }
                _ => 0,
            };
            work = work.saturating_add(n);
        }
        work.saturating_mul(per_element)
    }
}

/// What one step did.
#[derive(Clone, Debug, PartialEq)]
pub enum StepResult {
    /// Returned `Ok` and every result passed its invariants.
    Ok,
    /// Returned a typed error (the message).
    Err(String),
    /// Did not run (why).
    Skipped(&'static str),
    /// Panicked (the message and location).
    Panic(String),
    /// Returned `Ok` but a result broke an invariant (which).
    Break(String),
}

impl<B: FuzzBackend> Machine<B> {
    /// A machine with empty registers and scratch folder `dir` (created if needed).
    pub fn new(backend: B, dir: PathBuf) -> Self {
        let _ = std::fs::create_dir_all(&dir);
        Machine {
            backend,
            regs: vec![Vec::new(), Vec::new(), Vec::new(), Vec::new()],
            dir,
        }
    }

    /// Runs one step of the table `ops`: the operation under `catch_unwind`, then the
    /// invariants of what it returned. Fills the step's output registers; after a failure
    /// each output takes the value of the step's first argument of its kind (a tensor or a
    /// variable), so that the program goes on exercising the operations after it.
    pub fn run_step(&mut self, ops: &[Op<B>], step: &Step) -> StepResult {
        let op = &ops[step.op];
        let result = catch_unwind(AssertUnwindSafe(|| self.execute(op, step)));
        let (result, values) = match result {
            Ok(r) => r,
            Err(payload) => (
                StepResult::Panic(crate::panics::describe(payload)),
                Vec::new(),
            ),
        };
        let mut values = values.into_iter();
        for &(kind, index) in &step.outputs {
            debug_assert_eq!(self.regs[slot(kind)].len(), index, "outputs fill in order");
            let value = match (&result, values.next()) {
                (StepResult::Ok, Some(v)) if v.kind() == kind => Some(v),
                _ => self.fallback(step, kind),
            };
            self.regs[slot(kind)].push(value);
        }
        result
    }

    /// The value a failed step's output of `kind` takes: a clone of its first tensor or
    /// variable argument of that kind, if it has one that holds a value.
    fn fallback(&self, step: &Step, kind: Kind) -> Option<Value<B>> {
        step.args.iter().find_map(|a| match a {
            Arg::Reg(k, r) if *k == kind => match &self.regs[slot(kind)][*r] {
                Some(Value::Tensor(t)) => Some(Value::Tensor(t.clone())),
                Some(Value::Var(v)) => Some(Value::Var(v.clone())),
                _ => None,
            },
            _ => None,
        })
    }

    /// The operation and the checks of its results (inside `catch_unwind`).
    fn execute(&mut self, op: &Op<B>, step: &Step) -> (StepResult, Vec<Value<B>>) {
        let mut ctx = Ctx {
            machine: self,
            args: &step.args,
        };
        let work = match op.work {
            Some(f) => f(&ctx),
            None => Ok(ctx.input_work()),
        };
        match work {
            Err(Skip(why)) => return (StepResult::Skipped(why), Vec::new()),
            Ok(w) if w > B::WORK_BUDGET => {
                return (StepResult::Skipped("over the work budget"), Vec::new())
            }
            Ok(_) => {}
        }
        let outcome = match (op.run)(&mut ctx) {
            Err(Skip(why)) => return (StepResult::Skipped(why), Vec::new()),
            Ok(o) => o,
        };
        let values = match outcome {
            Outcome::Err(e) => return (StepResult::Err(e), Vec::new()),
            Outcome::Break(e) => return (StepResult::Break(e), Vec::new()),
            Outcome::Ok(values) => values,
        };
        let kinds: Vec<Kind> = values.iter().map(Value::kind).collect();
        if kinds != op.sig.outputs {
            return (
                StepResult::Break(format!(
                    "returned {kinds:?} for declared outputs {:?}",
                    op.sig.outputs
                )),
                Vec::new(),
            );
        }
        for (i, v) in values.iter().enumerate() {
            if let Err(e) = check_value(v) {
                return (StepResult::Break(format!("output {i}: {e}")), Vec::new());
            }
        }
        if let Some(expect) = op.expect {
            if let Err(e) = expect(&ctx, &values) {
                return (StepResult::Break(e), Vec::new());
            }
        }
        (StepResult::Ok, values)
    }
}

/// The outcome of a whole program: per step, and the first failure (a panic or a broken
/// invariant) if any; the program stops at its first failure.
#[derive(Clone, Debug)]
pub struct ProgramReport {
    /// What each step that ran did.
    pub steps: Vec<StepResult>,
    /// The index of the failing step, if one failed.
    pub failure: Option<usize>,
}

/// Runs `program` on backend `B` with the table `ops`, in scratch folder `dir` (removed
/// afterwards), calling `before_step(i)` before step `i`.
pub fn run_program<B: FuzzBackend>(
    program: &Program,
    ops: &[Op<B>],
    dir: PathBuf,
    before_step: &mut dyn FnMut(usize),
) -> ProgramReport {
    let mut machine = Machine::new(B::create(), dir.clone());
    let mut steps = Vec::with_capacity(program.steps.len());
    let mut failure = None;
    for (i, step) in program.steps.iter().enumerate() {
        before_step(i);
        let r = machine.run_step(ops, step);
        let failed = matches!(r, StepResult::Panic(_) | StepResult::Break(_));
        steps.push(r);
        if failed {
            failure = Some(i);
            break;
        }
    }
    drop(machine);
    let _ = std::fs::remove_dir_all(&dir);
    ProgramReport { steps, failure }
}
