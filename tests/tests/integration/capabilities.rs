//! Capability declarations: undeclared cells are reported as unsupported and never run, declared
//! ones are checked, and the macro's third argument declares them.

use tessera_backend_example::ExampleBackend;
use tessera_conformance::runner::RunConfig;
use tessera_conformance::suite::{run_family, Capabilities, Family, Op, Outcome};
use tessera_core::{DType, UnaryOp};

/// The macro with a capability declaration: only `where_select` on f32 and bool stays declared,
/// so the other 23 generated tests check nothing and pass at once.
mod only_where {
    use super::*;

    fn declared(dev: &ExampleBackend) -> Capabilities {
        Family::ALL
            .into_iter()
            .filter(|&f| f != Family::WhereSelect)
            .fold(Capabilities::declared_by(dev), Capabilities::without_family)
            .without_dtype(DType::F64)
            .without_dtype(DType::I64)
    }

    tessera_conformance::conformance_suite!(ExampleBackend, ExampleBackend::new, declared);
}

#[test]
fn undeclared_cells_are_unsupported_and_declared_ones_are_checked() {
    // f64 and the 16-bit floats left out: their cells must read `unsupported`, never run.
    let caps = Capabilities::all()
        .without_dtype(DType::F64)
        .without_dtype(DType::F16)
        .without_dtype(DType::BF16)
        .without_op(Op::Unary(UnaryOp::Exp));
    let coverage = run_family(
        &ExampleBackend::new(),
        Family::Unary,
        &caps,
        &RunConfig::from_env().with_cases(16),
    );
    let exp = Op::Unary(UnaryOp::Exp);
    let neg = Op::Unary(UnaryOp::Neg);
    assert_eq!(coverage.outcome(exp, DType::F32), Outcome::Unsupported);
    assert_eq!(coverage.outcome(exp, DType::I64), Outcome::Undefined);
    assert_eq!(coverage.outcome(neg, DType::F64), Outcome::Unsupported);
    assert_eq!(coverage.outcome(neg, DType::F32), Outcome::Pass);
    assert_eq!(coverage.outcome(neg, DType::I64), Outcome::Pass);
    assert_eq!(
        coverage.outcome(Op::Unary(UnaryOp::Not), DType::Bool),
        Outcome::Pass
    );
    assert!(coverage.passed());
    let text = coverage.to_string();
    assert!(
        text.contains("unary exp          unsupported  unsupported  unsupported  unsupported  -"),
        "{text}"
    );
}

#[test]
fn where_select_needs_bool_declared() {
    let caps = Capabilities::all().without_dtype(DType::Bool);
    assert!(!caps.declares(Op::Where, DType::F32));
    let coverage = run_family(
        &ExampleBackend::new(),
        Family::WhereSelect,
        &caps,
        &RunConfig::from_env().with_cases(16),
    );
    assert_eq!(coverage.cells(Outcome::Pass), vec![]);
    // Every dtype's cell: where_select is defined for all of them.
    assert_eq!(coverage.cells(Outcome::Unsupported).len(), DType::ALL.len());
}
