//! index_select, gather and scatter_add with valid indices; the data and the index tensors
//! both get random layouts.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close, assert_close_scaled, Tolerance};
use crate::reference::{indexing, RefArray};
use crate::runner::check_property;
use crate::strategies::{
    shape_with, special_rate, tensor_case, tensor_case_from, TensorCase, ValueProfile,
};
use proptest::prelude::*;
use tessera_core::{Backend, DType};

/// Which indexing op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexOp {
    /// `x.index_select(axis, indices)` with rank-1 indices.
    IndexSelect,
    /// `x.gather(axis, indices)`.
    Gather,
    /// `x.scatter_add(axis, indices, src)`.
    ScatterAdd,
}

/// One indexing op.
#[derive(Clone, Debug)]
pub struct IndexCase {
    /// The op.
    pub op: IndexOp,
    /// The axis indexed.
    pub axis: usize,
    /// The data (`base` for scatter_add).
    pub input: TensorCase,
    /// The `i64` indices, all in `0..input.shape[axis]`.
    pub indices: TensorCase,
    /// Values added by scatter_add (same shape as `indices`).
    pub src: Option<TensorCase>,
}

/// Valid index values for an axis of `size` (never drawn when `size` is 0, because then the
/// index tensor is empty).
fn index_value(size: usize) -> BoxedStrategy<f64> {
    (0..size.max(1)).prop_map(|i| i as f64).boxed()
}

/// The shape of a gather/scatter index tensor for `x_shape`: same rank, no larger than `x` off
/// `axis`, any length `0..=5` along it (0 when the axis of `x` is empty).
fn gather_index_shape(x_shape: Vec<usize>, axis: usize) -> BoxedStrategy<Vec<usize>> {
    let dims: Vec<BoxedStrategy<usize>> = x_shape
        .iter()
        .enumerate()
        .map(|(d, &size)| {
            if d == axis {
                if size == 0 {
                    Just(0usize).boxed()
                } else {
                    (0usize..=5).boxed()
                }
            } else {
                (0..=size).boxed()
            }
        })
        .collect();
    dims.boxed()
}

/// Cases of `op` with data of `dtype`.
pub fn cases(op: IndexOp, dtype: DType) -> BoxedStrategy<IndexCase> {
    (shape_with(1..=4, 0..=5), special_rate())
        .prop_flat_map(|(s, special)| {
            let rank = s.len();
            (Just(s), 0..rank, Just(special))
        })
        .prop_flat_map(move |(s, axis, special)| {
            let profile = ValueProfile::DEFAULT.with_specials(special);
            let size = s[axis];
            let index_shape = match op {
                IndexOp::IndexSelect => {
                    let len = if size == 0 {
                        Just(0usize).boxed()
                    } else {
                        (0usize..=6).boxed()
                    };
                    len.prop_map(|l| vec![l]).boxed()
                }
                IndexOp::Gather | IndexOp::ScatterAdd => gather_index_shape(s.clone(), axis),
            };
            (
                Just(axis),
                tensor_case(dtype, s, profile),
                index_shape.prop_flat_map(move |is| {
                    let src = match op {
                        IndexOp::ScatterAdd => tensor_case(dtype, is.clone(), profile)
                            .prop_map(Some)
                            .boxed(),
                        _ => Just(None).boxed(),
                    };
                    (tensor_case_from(DType::I64, is, index_value(size)), src)
                }),
            )
        })
        .prop_map(move |(axis, input, (indices, src))| IndexCase {
            op,
            axis,
            input,
            indices,
            src,
        })
        .boxed()
}

/// Compares the op with the reference (exact for the selections, accumulation tolerance for
/// scatter_add, whose order of additions is unspecified).
pub fn check<B: Backend>(dev: &B, case: &IndexCase) -> Result<(), String> {
    let dtype = case.input.dtype;
    let x = build(dev, &case.input, "input")?;
    let idx = build(dev, &case.indices, "indices")?;
    let (rx, ri) = (case.input.reference(), case.indices.reference());
    let axis = case.axis as isize;
    match case.op {
        IndexOp::IndexSelect => {
            let got = x
                .index_select(axis, &idx)
                .map_err(op_failed("index_select", &[&x, &idx]))?;
            let list: Vec<i64> = ri.data.iter().map(|&v| v as i64).collect();
            let expected = indexing::index_select(&rx, case.axis, &list);
            assert_close(&got, dtype, &expected, Tolerance::EXACT).map_err(with_inputs(&[&x, &idx]))
        }
        IndexOp::Gather => {
            let got = x
                .gather(axis, &idx)
                .map_err(op_failed("gather", &[&x, &idx]))?;
            let expected = indexing::gather(&rx, case.axis, &ri);
            assert_close(&got, dtype, &expected, Tolerance::EXACT).map_err(with_inputs(&[&x, &idx]))
        }
        IndexOp::ScatterAdd => {
            let src_case = case.src.as_ref().expect("scatter_add case has a src");
            let src = build(dev, src_case, "src")?;
            let got = x
                .scatter_add(axis, &idx, &src)
                .map_err(op_failed("scatter_add", &[&x, &idx, &src]))?;
            let rs = src_case.reference();
            let expected = indexing::scatter_add(dtype, &rx, case.axis, &ri, &rs);
            let magnitude: RefArray =
                indexing::scatter_add(DType::F64, &rx.abs(), case.axis, &ri, &rs.abs());
            let terms = 1 + ri.numel();
            assert_close_scaled(
                &got,
                dtype,
                &expected,
                &magnitude,
                Tolerance::accumulation(dtype, terms),
            )
            .map_err(with_inputs(&[&x, &idx, &src]))
        }
    }
}

/// Checks `op` on data of `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: IndexOp, dtype: DType) {
    check_property(&format!("{op:?} {dtype}"), cases(op, dtype), |c| {
        check(dev, c)
    });
}
