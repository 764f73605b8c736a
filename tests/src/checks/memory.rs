//! The memory primitives, called directly on the backend: `upload`, `download`, `full`,
//! `copy_strided` and `assign` (both modes), each with its own property, on every layout kind.
//!
//! Other families reach these only through `Tensor` (a wrong `download` of a strided layout
//! would show up as a wrong result of some other op); here each is checked on its own, so that
//! the coverage matrix names the primitive at fault.

use super::op_failed;
use crate::compare::{assert_close, compare_values, Tolerance};
use crate::reference::{elementwise, RefArray};
use crate::runner::check_property_systematic;
use crate::strategies::{
    recipe_of_kind, shape, tensor_case, tensor_case_of_kind, value, LayoutKind, LayoutRecipe,
    Pattern, TensorCase, ValueProfile, ALL_SPECIALS,
};
use proptest::prelude::*;
use tessera_core::direct as positional;
use tessera_core::{AssignMode, Backend, BackendStorage, DType, HostData, Layout, Tensor};

/// Which memory primitive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryOp {
    /// `upload` then a contiguous `download`: every bit back (NaN stays NaN).
    Upload,
    /// `download` through any layout: the logical elements in row-major order.
    Download,
    /// `full(numel, dtype, value)`: `value` converted as `Element::from_f64`.
    Full,
    /// `copy_strided`: a contiguous copy of any layout.
    CopyStrided,
    /// `assign` in both modes into a writable view of a storage; the rest left untouched.
    Assign,
}

impl MemoryOp {
    /// Every memory primitive.
    pub const ALL: [MemoryOp; 5] = [
        MemoryOp::Upload,
        MemoryOp::Download,
        MemoryOp::Full,
        MemoryOp::CopyStrided,
        MemoryOp::Assign,
    ];

    /// The Backend method's name.
    pub fn name(self) -> &'static str {
        match self {
            MemoryOp::Upload => "upload",
            MemoryOp::Download => "download",
            MemoryOp::Full => "full",
            MemoryOp::CopyStrided => "copy_strided",
            MemoryOp::Assign => "assign",
        }
    }
}

/// One case of a memory primitive.
#[derive(Clone, Debug)]
pub enum MemoryCase {
    /// Host data to upload and read back.
    Upload(HostData),
    /// A tensor to download (`Download`) or copy (`CopyStrided`) through its layout.
    Read(TensorCase),
    /// `full(numel, dtype, value)`.
    Full {
        /// Element count.
        numel: usize,
        /// Element type.
        dtype: DType,
        /// The fill value (converted like `Element::from_f64`).
        value: f64,
    },
    /// `assign(dst[dst_view], src, mode)` on a storage holding `base`.
    Assign {
        /// Overwrite or accumulate.
        mode: AssignMode,
        /// The destination storage's values (row-major, `dst_view.source_shape`).
        base: Vec<f64>,
        /// The written view of the destination (no broadcast).
        dst_view: LayoutRecipe,
        /// The source, of the view's shape.
        src: TensorCase,
    },
}

/// Host data of `dtype` with any bit patterns: every float (NaN, infinities, subnormals, -0),
/// every i64 (the extremes included), bools as 0/1.
fn host_data(dtype: DType, n: usize) -> BoxedStrategy<HostData> {
    match dtype {
        DType::F32 => prop::collection::vec(proptest::num::f32::ANY, n)
            .prop_map(HostData::F32)
            .boxed(),
        DType::F64 => prop::collection::vec(proptest::num::f64::ANY, n)
            .prop_map(HostData::F64)
            .boxed(),
        DType::I64 => prop::collection::vec(
            prop_oneof![any::<i64>(), Just(i64::MIN), Just(i64::MAX), -4i64..=4],
            n,
        )
        .prop_map(HostData::I64)
        .boxed(),
        DType::Bool => prop::collection::vec(0u8..=1, n)
            .prop_map(HostData::Bool)
            .boxed(),
        // Every 16-bit pattern: NaNs, infinities, subnormals, -0.
        DType::F16 => prop::collection::vec(any::<u16>().prop_map(tessera_core::f16::from_bits), n)
            .prop_map(HostData::F16)
            .boxed(),
        DType::BF16 => {
            prop::collection::vec(any::<u16>().prop_map(tessera_core::bf16::from_bits), n)
                .prop_map(HostData::BF16)
                .boxed()
        }
        other => panic!("no host data strategy for {other}"),
    }
}

/// Fill values: ordinary ones, the specials, and values that exercise the conversion
/// (truncation, saturation, rounding to f32, NaN to an integer or a bool).
fn fill_value() -> BoxedStrategy<f64> {
    prop_oneof![
        2 => value(DType::F64, ValueProfile::FINITE),
        1 => prop::sample::select(ALL_SPECIALS.to_vec()),
        1 => prop::sample::select(vec![2.5, -2.7, 1e20, -1e300, 16_777_217.0, 0.1]),
    ]
    .boxed()
}

/// A writable view (contiguous, permuted, offset or stepped) of `shape` over a larger storage.
fn writable_view(shape: Vec<usize>) -> BoxedStrategy<LayoutRecipe> {
    prop::sample::select(LayoutKind::WRITABLE.to_vec())
        .prop_flat_map(move |kind| recipe_of_kind(shape.clone(), kind))
        .boxed()
}

/// An assign case: the destination view, its base values and a source of the view's shape
/// laid out by `src_layout`.
fn assign_case(
    dtype: DType,
    view: BoxedStrategy<LayoutRecipe>,
    src_kind: Option<LayoutKind>,
) -> BoxedStrategy<MemoryCase> {
    let profile = ValueProfile::DEFAULT.with_specials(5);
    (view, any::<bool>())
        .prop_flat_map(move |(dst_view, accumulate)| {
            let shape = dst_view.shape();
            let src = match src_kind {
                Some(kind) => tensor_case_of_kind(dtype, shape, kind, value(dtype, profile)),
                None => tensor_case(dtype, shape, profile),
            };
            let mode = if accumulate {
                AssignMode::Accumulate
            } else {
                AssignMode::Overwrite
            };
            (
                Just(mode),
                prop::collection::vec(value(dtype, profile), dst_view.source_numel()),
                Just(dst_view),
                src,
            )
        })
        .prop_map(|(mode, base, dst_view, src)| MemoryCase::Assign {
            mode,
            base,
            dst_view,
            src,
        })
        .boxed()
}

/// Random cases of `op` on `dtype`.
pub fn cases(op: MemoryOp, dtype: DType) -> BoxedStrategy<MemoryCase> {
    match op {
        MemoryOp::Upload => (0usize..=40)
            .prop_flat_map(move |n| host_data(dtype, n))
            .prop_map(MemoryCase::Upload)
            .boxed(),
        MemoryOp::Download | MemoryOp::CopyStrided => shape()
            .prop_flat_map(move |s| tensor_case(dtype, s, ValueProfile::DEFAULT.with_specials(10)))
            .prop_map(MemoryCase::Read)
            .boxed(),
        MemoryOp::Full => (0usize..=40, fill_value())
            .prop_map(move |(numel, value)| MemoryCase::Full {
                numel,
                dtype,
                value,
            })
            .boxed(),
        MemoryOp::Assign => assign_case(dtype, shape().prop_flat_map(writable_view).boxed(), None),
    }
}

/// The systematic cases of `op` on `dtype`: every layout kind read (download, copy) or written
/// (assign: every writable kind of the destination, every kind of the source).
pub fn patterns(op: MemoryOp, dtype: DType) -> Vec<Pattern<MemoryCase>> {
    let shape3 = || prop::collection::vec(2usize..=4, 3);
    match op {
        MemoryOp::Upload | MemoryOp::Full => vec![],
        MemoryOp::Download | MemoryOp::CopyStrided => LayoutKind::ALL
            .into_iter()
            .map(|kind| {
                let strategy = shape3()
                    .prop_flat_map(move |s| {
                        tensor_case_of_kind(
                            dtype,
                            s,
                            kind,
                            value(dtype, ValueProfile::DEFAULT.with_specials(20)),
                        )
                    })
                    .prop_map(MemoryCase::Read)
                    .boxed();
                Pattern::new(format!("input {kind}"), strategy)
            })
            .collect(),
        MemoryOp::Assign => {
            let mut out = Vec::new();
            for kind in LayoutKind::WRITABLE {
                let view = shape3()
                    .prop_flat_map(move |s| recipe_of_kind(s, kind))
                    .boxed();
                out.push(Pattern::new(
                    format!("destination {kind}"),
                    assign_case(dtype, view, Some(LayoutKind::Contiguous)),
                ));
            }
            for kind in LayoutKind::ALL {
                let view = shape3().prop_map(LayoutRecipe::contiguous).boxed();
                out.push(Pattern::new(
                    format!("source {kind}"),
                    assign_case(dtype, view, Some(kind)),
                ));
            }
            out
        }
    }
}

/// Host data of `dtype` from f64 values (as `Tensor::from_f64_values` converts them).
fn host_from_f64(dtype: DType, v: &[f64]) -> HostData {
    match dtype {
        DType::F32 => HostData::F32(v.iter().map(|&x| x as f32).collect()),
        DType::F64 => HostData::F64(v.to_vec()),
        DType::I64 => HostData::I64(v.iter().map(|&x| x as i64).collect()),
        DType::Bool => HostData::Bool(v.iter().map(|&x| u8::from(x != 0.0)).collect()),
        // The values are of the dtype already (exact conversions).
        DType::F16 => HostData::F16(v.iter().map(|&x| tessera_core::f16::from_f64(x)).collect()),
        DType::BF16 => HostData::BF16(v.iter().map(|&x| tessera_core::bf16::from_f64(x)).collect()),
        other => panic!("no host data for {other}"),
    }
}

/// Checks a storage's dtype and length.
fn check_storage<S: BackendStorage>(
    what: &str,
    s: &S,
    dtype: DType,
    len: usize,
) -> Result<(), String> {
    if s.dtype() != dtype || s.len() != len || s.is_empty() != (len == 0) {
        return Err(format!(
            "{what} returned a storage of {} x {} (is_empty {}), expected {dtype} x {len}",
            s.dtype(),
            s.len(),
            s.is_empty()
        ));
    }
    Ok(())
}

/// Whether two host buffers hold the same elements bit for bit (any NaN matches any NaN).
fn same_bits(got: &HostData, want: &HostData) -> Result<(), String> {
    let differs = |i: usize| format!("element {i}: got {got:?}, uploaded {want:?}");
    match (got, want) {
        (HostData::F32(g), HostData::F32(w)) if g.len() == w.len() => {
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                if !(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())) {
                    return Err(differs(i));
                }
            }
            Ok(())
        }
        (HostData::F64(g), HostData::F64(w)) if g.len() == w.len() => {
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                if !(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())) {
                    return Err(differs(i));
                }
            }
            Ok(())
        }
        (HostData::F16(g), HostData::F16(w)) if g.len() == w.len() => {
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                if !(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())) {
                    return Err(differs(i));
                }
            }
            Ok(())
        }
        (HostData::BF16(g), HostData::BF16(w)) if g.len() == w.len() => {
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                if !(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())) {
                    return Err(differs(i));
                }
            }
            Ok(())
        }
        _ if got == want => Ok(()),
        _ => Err(format!("got {got:?}, uploaded {want:?}")),
    }
}

/// Checks one case of `op`.
pub fn check<B: Backend>(dev: &B, op: MemoryOp, case: &MemoryCase) -> Result<(), String> {
    let failed = |what: &str| {
        let what = what.to_string();
        move |e: tessera_core::Error| format!("{what} returned an error: {e}")
    };
    match case {
        MemoryCase::Upload(data) => {
            let n = data.len();
            let s = dev.upload(data.clone()).map_err(failed("upload"))?;
            check_storage("upload", &s, data.dtype(), n)?;
            let back = positional::download(dev, &s, &Layout::contiguous([n]))
                .map_err(failed("download"))?;
            same_bits(&back, data)
        }
        MemoryCase::Read(input) => {
            let t = input
                .build(dev)
                .map_err(|e| format!("building the input failed: {e}"))?;
            let expected = input.reference();
            let n = expected.numel();
            let values = if op == MemoryOp::CopyStrided {
                let copy = positional::copy_strided(dev, t.storage(), t.layout())
                    .map_err(failed("copy_strided"))?;
                check_storage("copy_strided", &copy, input.dtype, n)?;
                positional::download(dev, &copy, &Layout::contiguous(expected.shape.clone()))
                    .map_err(failed("download"))?
            } else {
                positional::download(dev, t.storage(), t.layout()).map_err(failed("download"))?
            };
            if values.dtype() != input.dtype {
                return Err(format!("got {} elements", values.dtype()));
            }
            compare_values(
                &values.to_f64_vec(),
                &expected.shape,
                &expected,
                None,
                exact_for(input.dtype),
            )
            .map_err(|e| format!("{e}\n  layout: {:?}", t.layout()))
        }
        MemoryCase::Full {
            numel,
            dtype,
            value,
        } => {
            let s = dev.full(*numel, *dtype, *value).map_err(failed("full"))?;
            check_storage("full", &s, *dtype, *numel)?;
            let got = Tensor::from_parts(dev, s, Layout::contiguous([*numel]))
                .map_err(failed("wrapping full's storage"))?;
            let expected = RefArray::full(vec![*numel], elementwise::cast_value(*dtype, *value));
            assert_close(&got, *dtype, &expected, exact_for(*dtype))
        }
        MemoryCase::Assign {
            mode,
            base,
            dst_view,
            src,
        } => {
            let dtype = src.dtype;
            let dst_layout = dst_view
                .layout()
                .map_err(|e| format!("building the destination view failed: {e}"))?;
            let mut storage = dev
                .upload(host_from_f64(dtype, base))
                .map_err(failed("upload"))?;
            let s = src
                .build(dev)
                .map_err(|e| format!("building the source failed: {e}"))?;
            positional::assign(
                dev,
                (&mut storage, &dst_layout),
                (s.storage(), s.layout()),
                *mode,
            )
            .map_err(op_failed::<B, _>("assign", &[&s]))?;
            let n = base.len();
            let got = Tensor::from_parts(dev, storage, Layout::contiguous([n]))
                .map_err(failed("wrapping the destination"))?;
            let expected = assigned(dtype, *mode, base, dst_view, &src.reference());
            assert_close(&got, dtype, &expected, exact_for(dtype)).map_err(|e| {
                format!(
                    "{e}\n  destination view {dst_layout:?}\n  source layout {:?}",
                    s.layout()
                )
            })
        }
    }
}

/// Copies are exact, the sign of zero included (and bools/ints always exact).
fn exact_for(_dtype: DType) -> Tolerance {
    Tolerance::EXACT
}

/// The destination after `assign`: `base` with every position of the view overwritten by, or
/// (wrapping for i64, `or` for bool) increased by, the source element at the same index.
fn assigned(
    dtype: DType,
    mode: AssignMode,
    base: &[f64],
    view: &LayoutRecipe,
    src: &RefArray,
) -> RefArray {
    let positions: Vec<f64> = (0..base.len()).map(|i| i as f64).collect();
    let at = view.apply_ref(&positions);
    let mut out = base.to_vec();
    for (p, &v) in at.data.iter().zip(&src.data) {
        let p = *p as usize;
        out[p] = match mode {
            AssignMode::Overwrite => v,
            AssignMode::Accumulate => match dtype {
                DType::Bool => f64::from(out[p] != 0.0 || v != 0.0),
                DType::I64 => (out[p] as i64).wrapping_add(v as i64) as f64,
                _ => elementwise::round_to(dtype, out[p] + v),
            },
        };
    }
    RefArray::new(vec![base.len()], out)
}

/// Checks `op` on `dtype`: the systematic patterns, then 256 random cases.
pub fn run<B: Backend>(dev: &B, op: MemoryOp, dtype: DType) {
    check_property_systematic(
        &format!("memory {} {dtype}", op.name()),
        patterns(op, dtype),
        cases(op, dtype),
        |c| check(dev, op, c),
    );
}
