//! Every binary op on every dtype it supports, with broadcasting between two independent
//! layouts, on the CPU backend.

use backend_cpu::Cpu;
use tensor_core::BinaryOp;
use tests::checks::binary;

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
