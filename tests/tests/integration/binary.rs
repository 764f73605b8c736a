//! Every binary op on every dtype it supports, with broadcasting between two independent
//! layouts, on the CPU backend.

use tessera_conformance::checks::binary;
use tessera_core::BinaryOp;
use tessera_cpu::Cpu;

macro_rules! binary_tests {
    ($($name:ident: $op:ident;)*) => {
        $(
            #[test]
            fn $name() {
                let dev = Cpu::new();
                for dtype in binary::supported_dtypes(BinaryOp::$op) {
                    binary::run(&dev, BinaryOp::$op, dtype);
                }
            }
        )*
    };
}

binary_tests! {
    add: Add;
    sub: Sub;
    mul: Mul;
    div: Div;
    pow: Pow;
    maximum: Maximum;
    minimum: Minimum;
}

#[test]
fn every_binary_op_has_a_test() {
    assert_eq!(BinaryOp::ALL.len(), 7);
}
