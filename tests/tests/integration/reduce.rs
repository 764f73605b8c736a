//! sum / prod / max / min over random axis subsets, keepdim both ways, on the CPU backend.

use tessera_conformance::checks::reduce;
use tessera_core::{DType, ReduceOp};
use tessera_cpu::Cpu;

macro_rules! reduce_tests {
    ($($name:ident: $op:ident;)*) => {
        $(
            #[test]
            fn $name() {
                let dev = Cpu::new();
                for dtype in DType::ALL {
                    reduce::run(&dev, ReduceOp::$op, dtype);
                }
            }
        )*
    };
}

reduce_tests! {
    sum: Sum;
    prod: Prod;
    max: Max;
    min: Min;
}
