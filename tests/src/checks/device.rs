//! The identity and housekeeping methods of a backend: `name`, `device`, `supports_dtype` and
//! `synchronize`, each with its own property.
//!
//! `synchronize` is checked as what every caller relies on: it returns `Ok` once ordinary
//! queued work (copies, fills, reductions) is done, leaves that work's results intact, and can
//! be called again. Its other duty, reporting an asynchronous error (an out-of-range index on a
//! GPU), is not planted here: the error flag of a device is shared by the whole process, so a
//! planted error could surface in another family's test running at the same time. The GPU
//! crates check it in their own single-test files (`backend-opencl/tests/async_errors.rs`).

use super::build;
use crate::compare::{assert_close, Tolerance};
use crate::reference::{reduce, RefArray};
use crate::runner::check_property_systematic;
use crate::strategies::{shape, tensor_case, Pattern, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::dispatch::HalfOp;
use tessera_core::{Backend, DType, HostData, ReduceOp, Tensor};

/// Which method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceOp {
    /// `name()`: a non-empty `[a-z0-9_-]` word (it names folders), the same on every clone and
    /// on every tensor's backend.
    Name,
    /// `device()`: the same on every clone, carried by every tensor made on the backend and by
    /// the results of ops on them.
    Device,
    /// `supports_dtype(dtype)`: true for a declared dtype, whose tensors then upload, fill and
    /// read back; for a dtype it rejects, `upload` returns an error rather than a storage.
    SupportsDtype,
    /// `computes_16_bit(op, dtype)`: the same answer on every clone, and an op declared native
    /// only on a 16-bit dtype that `supports_dtype` accepts (the dispatch hands the declared
    /// ops that dtype as stored; the conformance families then run them).
    Computes16Bit,
    /// `synchronize()`: `Ok` after queued work, which keeps its results; callable twice.
    Synchronize,
}

impl DeviceOp {
    /// Every method of the family.
    pub const ALL: [DeviceOp; 5] = [
        DeviceOp::Name,
        DeviceOp::Device,
        DeviceOp::SupportsDtype,
        DeviceOp::Computes16Bit,
        DeviceOp::Synchronize,
    ];

    /// The Backend method's name.
    pub fn name(self) -> &'static str {
        match self {
            DeviceOp::Name => "name",
            DeviceOp::Device => "device",
            DeviceOp::SupportsDtype => "supports_dtype",
            DeviceOp::Computes16Bit => "computes_16_bit",
            DeviceOp::Synchronize => "synchronize",
        }
    }
}

/// One case: a tensor of the column's dtype to make and compute with.
#[derive(Clone, Debug)]
pub struct DeviceCase {
    /// The method checked.
    pub op: DeviceOp,
    /// A tensor of the dtype of the cell.
    pub input: TensorCase,
}

/// Cases of `op` on `dtype`: any shape and layout.
pub fn cases(op: DeviceOp, dtype: DType) -> BoxedStrategy<DeviceCase> {
    shape()
        .prop_flat_map(move |s| tensor_case(dtype, s, ValueProfile::DEFAULT))
        .prop_map(move |input| DeviceCase { op, input })
        .boxed()
}

/// No systematic patterns: the properties do not depend on a layout.
pub fn patterns(_op: DeviceOp, _dtype: DType) -> Vec<Pattern<DeviceCase>> {
    vec![]
}

/// Host data of `dtype` holding `n` zeros.
fn zeros(dtype: DType, n: usize) -> HostData {
    match dtype {
        DType::F32 => HostData::F32(vec![0.0; n]),
        DType::F64 => HostData::F64(vec![0.0; n]),
        DType::I64 => HostData::I64(vec![0; n]),
        DType::Bool => HostData::Bool(vec![0; n]),
        DType::F16 => HostData::F16(vec![tessera_core::f16::ZERO; n]),
        DType::BF16 => HostData::BF16(vec![tessera_core::bf16::ZERO; n]),
        other => panic!("no zeros for {other}"),
    }
}

/// Checks one case.
pub fn check<B: Backend>(dev: &B, case: &DeviceCase) -> Result<(), String> {
    let dtype = case.input.dtype;
    let failed = |what: &'static str| move |e: tessera_core::Error| format!("{what}: {e}");
    match case.op {
        DeviceOp::Name => {
            let name = dev.name();
            let word = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-".contains(c));
            if !word {
                return Err(format!("name {name:?} is not a lower-case [a-z0-9_-] word"));
            }
            let t = build(dev, &case.input, "input")?;
            let others = [dev.clone().name(), t.backend().name()];
            if others.iter().any(|&o| o != name) {
                return Err(format!(
                    "name {name:?}, but clones and tensors say {others:?}"
                ));
            }
            Ok(())
        }
        DeviceOp::Device => {
            let device = dev.device();
            if device.kind.is_empty() || dev.clone().device() != device {
                return Err(format!(
                    "device {device:?}, a clone's {:?}",
                    dev.clone().device()
                ));
            }
            let t = build(dev, &case.input, "input")?;
            let copy = t.contiguous().map_err(failed("contiguous"))?;
            for (what, got) in [
                ("a tensor made on it", t.backend().device()),
                ("a copy", copy.backend().device()),
            ] {
                if got != device {
                    return Err(format!("{what} is on {got}, the backend on {device}"));
                }
            }
            Ok(())
        }
        DeviceOp::SupportsDtype => {
            if !dev.supports_dtype(dtype) {
                return Err(format!(
                    "{dtype} is declared but supports_dtype({dtype}) is false"
                ));
            }
            let t = build(dev, &case.input, "input")?;
            assert_close(&t, dtype, &case.input.reference(), Tolerance::EXACT)?;
            let n = t.numel();
            let filled =
                Tensor::full(t.dims().to_vec(), 1.0, dtype, dev).map_err(failed("full"))?;
            assert_close(
                &filled,
                dtype,
                &RefArray::full(t.dims().to_vec(), 1.0),
                Tolerance::EXACT,
            )?;
            for other in DType::ALL.into_iter().filter(|&d| !dev.supports_dtype(d)) {
                if dev.upload(zeros(other, n.max(1))).is_ok() {
                    return Err(format!(
                        "supports_dtype({other}) is false but uploading {other} data succeeded"
                    ));
                }
            }
            Ok(())
        }
        DeviceOp::Computes16Bit => {
            let clone = dev.clone();
            for op in HalfOp::ALL {
                let native = dev.computes_16_bit(op, dtype);
                if native != clone.computes_16_bit(op, dtype) {
                    return Err(format!(
                        "computes_16_bit({op:?}, {dtype}) differs between clones"
                    ));
                }
                if native && dtype.is_half() && !dev.supports_dtype(dtype) {
                    return Err(format!(
                        "computes_16_bit({op:?}, {dtype}) is true but supports_dtype({dtype}) \
                         is false"
                    ));
                }
            }
            Ok(())
        }
        DeviceOp::Synchronize => {
            dev.synchronize().map_err(failed("synchronize on entry"))?;
            let t = build(dev, &case.input, "input")?;
            let copy = t.contiguous().map_err(failed("contiguous"))?;
            let total = t.sum_all().map_err(failed("sum_all"))?;
            dev.synchronize()
                .map_err(failed("synchronize after queued work"))?;
            dev.synchronize().map_err(failed("a second synchronize"))?;
            let input = case.input.reference();
            assert_close(&copy, dtype, &input, Tolerance::EXACT)
                .map_err(|e| format!("the copy after synchronize: {e}"))?;
            let sum_dtype = if dtype == DType::Bool {
                DType::I64
            } else {
                dtype
            };
            let all: Vec<usize> = (0..input.rank()).collect();
            let expected = reduce::reduce(ReduceOp::Sum, sum_dtype, &input, &all);
            let expected = RefArray::new(vec![], expected.data);
            let magnitude = reduce::reduce(ReduceOp::Sum, DType::F64, &input.abs(), &all);
            let magnitude = RefArray::new(vec![], magnitude.data);
            crate::compare::assert_close_scaled(
                &total,
                sum_dtype,
                &expected,
                &magnitude,
                Tolerance::accumulation(sum_dtype, input.numel()),
            )
            .map_err(|e| format!("the sum after synchronize: {e}"))?;
            dev.clone()
                .synchronize()
                .map_err(failed("synchronize on a clone"))
        }
    }
}

/// Checks `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: DeviceOp, dtype: DType) {
    check_property_systematic(
        &format!("device {} {dtype}", op.name()),
        patterns(op, dtype),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
