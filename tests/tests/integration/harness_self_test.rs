//! The harness must catch a broken backend: a backend that delegates to the CPU backend but
//! plants one fault (a layout bug, an operand-order bug, an off-by-one random offset) must make
//! the matching property fail, while the healthy delegate passes.

use std::panic::{catch_unwind, AssertUnwindSafe};
use tessera_conformance::checks::{binary, random, unary};
use tessera_core::dispatch::HalfOp;
use tessera_core::operand::{
    Assignment, Gather, IndexSelect, MatmulOperands, Operand, SameShape, ScatterAdd,
};
use tessera_core::{
    direct, ArgReduceOp, AssignMode, Backend, BinaryOp, CmpOp, DType, Device, Distribution,
    HostData, Layout, ReduceOp, Result, UnaryOp,
};
use tessera_cpu::Cpu;

/// The fault a [`Faulty`] backend plants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// None: a plain delegate.
    Healthy,
    /// `unary` reads its input as if it were contiguous from offset 0.
    UnaryAssumesContiguous,
    /// `binary` computes `rhs - lhs` for `Sub`.
    SubSwapsOperands,
    /// `random` starts one counter late.
    RandomOffByOne,
}

/// The CPU backend with one planted fault.
#[derive(Clone, Debug)]
struct Faulty {
    cpu: Cpu,
    fault: Fault,
}

type Storage = <Cpu as Backend>::Storage;

impl Backend for Faulty {
    type Storage = Storage;

    fn name(&self) -> &'static str {
        "faulty"
    }
    fn device(&self) -> Device {
        self.cpu.device()
    }
    fn supports_dtype(&self, dtype: DType) -> bool {
        self.cpu.supports_dtype(dtype)
    }
    /// The primitives are the CPU backend's, so its declaration holds for them; the composites
    /// are tensor-core's defaults, which compute in the dtype they are given.
    fn computes_16_bit(&self, op: HalfOp, dtype: DType) -> bool {
        op.is_primitive() && self.cpu.computes_16_bit(op, dtype)
    }
    fn upload(&self, data: HostData) -> Result<Storage> {
        self.cpu.upload(data)
    }
    fn download(&self, x: Operand<'_, Storage>) -> Result<HostData> {
        self.cpu.download(x)
    }
    fn full(&self, n: usize, dtype: DType, value: f64) -> Result<Storage> {
        self.cpu.full(n, dtype, value)
    }
    fn copy_strided(&self, x: Operand<'_, Storage>) -> Result<Storage> {
        self.cpu.copy_strided(x)
    }
    fn assign(&self, to: Assignment<'_, Storage>, mode: AssignMode) -> Result<()> {
        self.cpu.assign(to, mode)
    }
    fn cast(&self, x: Operand<'_, Storage>, dtype: DType) -> Result<Storage> {
        self.cpu.cast(x, dtype)
    }
    fn unary(&self, op: UnaryOp, x: Operand<'_, Storage>) -> Result<Storage> {
        if self.fault == Fault::UnaryAssumesContiguous {
            let contiguous = Layout::contiguous(x.dims());
            return direct::unary(&self.cpu, op, x.storage(), &contiguous);
        }
        self.cpu.unary(op, x)
    }
    fn binary(&self, op: BinaryOp, xs: SameShape<'_, Storage, 2>) -> Result<Storage> {
        if self.fault == Fault::SubSwapsOperands && op == BinaryOp::Sub {
            let [a, b] = xs.operands();
            return self.cpu.binary(op, SameShape::new(op.name(), [b, a])?);
        }
        self.cpu.binary(op, xs)
    }
    fn compare(&self, op: CmpOp, xs: SameShape<'_, Storage, 2>) -> Result<Storage> {
        self.cpu.compare(op, xs)
    }
    fn where_select(&self, xs: SameShape<'_, Storage, 3>) -> Result<Storage> {
        self.cpu.where_select(xs)
    }
    fn reduce(&self, op: ReduceOp, x: Operand<'_, Storage>, axes: &[usize]) -> Result<Storage> {
        self.cpu.reduce(op, x, axes)
    }
    fn arg_reduce(&self, op: ArgReduceOp, x: Operand<'_, Storage>, axis: usize) -> Result<Storage> {
        self.cpu.arg_reduce(op, x, axis)
    }
    fn matmul(&self, xs: MatmulOperands<'_, Storage>) -> Result<Storage> {
        self.cpu.matmul(xs)
    }
    fn index_select(&self, xs: IndexSelect<'_, Storage>) -> Result<Storage> {
        self.cpu.index_select(xs)
    }
    fn gather(&self, xs: Gather<'_, Storage>) -> Result<Storage> {
        self.cpu.gather(xs)
    }
    fn scatter_add(&self, xs: ScatterAdd<'_, Storage>) -> Result<Storage> {
        self.cpu.scatter_add(xs)
    }
    fn random(
        &self,
        dist: Distribution,
        n: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<Storage> {
        let offset = if self.fault == Fault::RandomOffByOne {
            offset + 1
        } else {
            offset
        };
        self.cpu.random(dist, n, dtype, seed, offset)
    }
}

fn faulty(fault: Fault) -> Faulty {
    Faulty {
        cpu: Cpu::new(),
        fault,
    }
}

/// Whether `f` panics (a property failure), with the panic message.
fn fails(f: impl FnOnce()) -> Option<String> {
    let outcome = catch_unwind(AssertUnwindSafe(f));
    outcome.err().map(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| "non-string panic".into())
    })
}

#[test]
fn a_healthy_delegate_passes() {
    let dev = faulty(Fault::Healthy);
    unary::run(&dev, UnaryOp::Exp, DType::F32);
    binary::run(&dev, BinaryOp::Sub, DType::F64);
    random::run(&dev, DType::F32);
}

#[test]
fn a_layout_bug_is_caught_with_the_offending_layout() {
    let dev = faulty(Fault::UnaryAssumesContiguous);
    let msg = fails(|| unary::run(&dev, UnaryOp::Neg, DType::F32))
        .expect("the layout bug must be caught");
    assert!(msg.contains("property `unary neg f32"), "{msg}");
    assert!(
        msg.contains("strides") && msg.contains("minimal failing input"),
        "{msg}"
    );
}

#[test]
fn an_operand_order_bug_is_caught() {
    let dev = faulty(Fault::SubSwapsOperands);
    let msg = fails(|| binary::run(&dev, BinaryOp::Sub, DType::I64))
        .expect("swapped operands must be caught");
    assert!(msg.contains("property `binary sub i64"), "{msg}");
    // The other ops are unaffected.
    binary::run(&dev, BinaryOp::Add, DType::I64);
}

#[test]
fn a_random_offset_bug_is_caught() {
    let dev = faulty(Fault::RandomOffByOne);
    let msg =
        fails(|| random::run(&dev, DType::F64)).expect("an off-by-one counter must be caught");
    assert!(msg.contains("property `random f64` failed"), "{msg}");
}
