//! Every unary op on every dtype it supports, on the CPU backend.

use tessera_conformance::checks::unary;
use tessera_core::{DType, UnaryOp};
use tessera_cpu::Cpu;

macro_rules! unary_tests {
    ($($name:ident: $op:ident;)*) => {
        $(
            #[test]
            fn $name() {
                let dev = Cpu::new();
                for dtype in unary::supported_dtypes(UnaryOp::$op) {
                    unary::run(&dev, UnaryOp::$op, dtype);
                }
            }
        )*
    };
}

unary_tests! {
    neg: Neg;
    abs: Abs;
    sign: Sign;
    square: Square;
    recip: Recip;
    sqrt: Sqrt;
    exp: Exp;
    log: Log;
    sin: Sin;
    cos: Cos;
    tanh: Tanh;
    sigmoid: Sigmoid;
    relu: Relu;
    gelu: Gelu;
    erf: Erf;
    floor: Floor;
    ceil: Ceil;
    logical_not: Not;
}

#[test]
fn every_unary_op_has_a_test() {
    // The macro above lists each op once; this fails when an op is added to tensor-core.
    assert_eq!(UnaryOp::ALL.len(), 18);
    assert!(UnaryOp::ALL
        .iter()
        .all(|op| !unary::supported_dtypes(*op).is_empty()));
    assert_eq!(
        unary::supported_dtypes(UnaryOp::Neg),
        vec![DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64]
    );
}
