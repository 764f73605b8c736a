//! The harness must catch a broken backend: a backend that delegates to the CPU backend but
//! plants one fault (a layout bug, an operand-order bug, an off-by-one random offset) must make
//! the matching property fail, while the healthy delegate passes.

use std::panic::{catch_unwind, AssertUnwindSafe};
use tessera_conformance::checks::{binary, random, unary};
use tessera_core::{
    ArgReduceOp, AssignMode, Backend, BinaryOp, CmpOp, DType, Device, Distribution, HostData,
    Layout, ReduceOp, Result, UnaryOp,
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
    fn upload(&self, data: HostData) -> Result<Storage> {
        self.cpu.upload(data)
    }
    fn download(&self, s: &Storage, l: &Layout) -> Result<HostData> {
        self.cpu.download(s, l)
    }
    fn full(&self, n: usize, dtype: DType, value: f64) -> Result<Storage> {
        self.cpu.full(n, dtype, value)
    }
    fn copy_strided(&self, s: &Storage, l: &Layout) -> Result<Storage> {
        self.cpu.copy_strided(s, l)
    }
    fn assign(
        &self,
        d: &mut Storage,
        dl: &Layout,
        s: &Storage,
        sl: &Layout,
        m: AssignMode,
    ) -> Result<()> {
        self.cpu.assign(d, dl, s, sl, m)
    }
    fn cast(&self, s: &Storage, l: &Layout, dtype: DType) -> Result<Storage> {
        self.cpu.cast(s, l, dtype)
    }
    fn unary(&self, op: UnaryOp, x: &Storage, l: &Layout) -> Result<Storage> {
        if self.fault == Fault::UnaryAssumesContiguous {
            return self
                .cpu
                .unary(op, x, &Layout::contiguous(l.shape().clone()));
        }
        self.cpu.unary(op, x, l)
    }
    fn binary(
        &self,
        op: BinaryOp,
        a: &Storage,
        al: &Layout,
        b: &Storage,
        bl: &Layout,
    ) -> Result<Storage> {
        if self.fault == Fault::SubSwapsOperands && op == BinaryOp::Sub {
            return self.cpu.binary(op, b, bl, a, al);
        }
        self.cpu.binary(op, a, al, b, bl)
    }
    fn compare(
        &self,
        op: CmpOp,
        a: &Storage,
        al: &Layout,
        b: &Storage,
        bl: &Layout,
    ) -> Result<Storage> {
        self.cpu.compare(op, a, al, b, bl)
    }
    fn where_select(
        &self,
        c: &Storage,
        cl: &Layout,
        t: &Storage,
        tl: &Layout,
        f: &Storage,
        fl: &Layout,
    ) -> Result<Storage> {
        self.cpu.where_select(c, cl, t, tl, f, fl)
    }
    fn reduce(&self, op: ReduceOp, x: &Storage, l: &Layout, axes: &[usize]) -> Result<Storage> {
        self.cpu.reduce(op, x, l, axes)
    }
    fn arg_reduce(&self, op: ArgReduceOp, x: &Storage, l: &Layout, axis: usize) -> Result<Storage> {
        self.cpu.arg_reduce(op, x, l, axis)
    }
    fn matmul(&self, a: &Storage, al: &Layout, b: &Storage, bl: &Layout) -> Result<Storage> {
        self.cpu.matmul(a, al, b, bl)
    }
    fn index_select(
        &self,
        x: &Storage,
        l: &Layout,
        axis: usize,
        i: &Storage,
        il: &Layout,
    ) -> Result<Storage> {
        self.cpu.index_select(x, l, axis, i, il)
    }
    fn gather(
        &self,
        x: &Storage,
        l: &Layout,
        axis: usize,
        i: &Storage,
        il: &Layout,
    ) -> Result<Storage> {
        self.cpu.gather(x, l, axis, i, il)
    }
    fn scatter_add(
        &self,
        base: &Storage,
        bl: &Layout,
        axis: usize,
        i: &Storage,
        il: &Layout,
        src: &Storage,
        sl: &Layout,
    ) -> Result<Storage> {
        self.cpu.scatter_add(base, bl, axis, i, il, src, sl)
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
    assert!(msg.contains("property `unary neg f32` failed"), "{msg}");
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
    assert!(msg.contains("property `binary sub i64` failed"), "{msg}");
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
