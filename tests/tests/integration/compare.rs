//! Every comparison on every dtype, with broadcasting, on the CPU backend.

use tessera_conformance::checks::comparison;
use tessera_core::{CmpOp, DType};
use tessera_cpu::Cpu;

macro_rules! compare_tests {
    ($($name:ident: $op:ident;)*) => {
        $(
            #[test]
            fn $name() {
                let dev = Cpu::new();
                for dtype in DType::ALL {
                    comparison::run(&dev, CmpOp::$op, dtype);
                }
            }
        )*
    };
}

compare_tests! {
    eq: Eq;
    ne: Ne;
    lt: Lt;
    le: Le;
    gt: Gt;
    ge: Ge;
}

#[test]
fn every_comparison_has_a_test() {
    assert_eq!(CmpOp::ALL.len(), 6);
}
