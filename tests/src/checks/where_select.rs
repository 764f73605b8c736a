//! `where`: a bool mask selecting between two branches, all three broadcast together.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::elementwise;
use crate::runner::check_property;
use crate::strategies::{
    broadcastable_to, shape, special_rate, tensor_case, TensorCase, ValueProfile,
};
use proptest::prelude::*;
use tessera_core::{Backend, DType};

/// One select.
#[derive(Clone, Debug)]
pub struct WhereCase {
    /// The bool mask.
    pub cond: TensorCase,
    /// Values where the mask is true.
    pub on_true: TensorCase,
    /// Values where the mask is false.
    pub on_false: TensorCase,
}

/// Cases with branches of `dtype`.
pub fn cases(dtype: DType) -> BoxedStrategy<WhereCase> {
    (shape(), special_rate())
        .prop_flat_map(|(out, special)| {
            (
                broadcastable_to(out.clone()),
                broadcastable_to(out.clone()),
                broadcastable_to(out),
                Just(special),
            )
        })
        .prop_flat_map(move |(c, t, f, special)| {
            let profile = ValueProfile::DEFAULT.with_specials(special);
            (
                tensor_case(DType::Bool, c, profile),
                tensor_case(dtype, t, profile),
                tensor_case(dtype, f, profile),
            )
        })
        .prop_map(|(cond, on_true, on_false)| WhereCase {
            cond,
            on_true,
            on_false,
        })
        .boxed()
}

/// Compares `cond.where_select(on_true, on_false)` with the reference.
pub fn check<B: Backend>(dev: &B, case: &WhereCase) -> Result<(), String> {
    let c = build(dev, &case.cond, "cond")?;
    let t = build(dev, &case.on_true, "on_true")?;
    let f = build(dev, &case.on_false, "on_false")?;
    let got = c
        .where_select(&t, &f)
        .map_err(op_failed("where", &[&c, &t, &f]))?;
    let expected = elementwise::where_select(
        &case.cond.reference(),
        &case.on_true.reference(),
        &case.on_false.reference(),
    );
    // Selection copies values: exact, including the sign of zero.
    assert_close(&got, case.on_true.dtype, &expected, Tolerance::EXACT)
        .map_err(with_inputs(&[&c, &t, &f]))
}

/// Checks `where` with branches of `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, dtype: DType) {
    check_property(&format!("where {dtype}"), cases(dtype), |c| check(dev, c));
}
