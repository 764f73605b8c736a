//! sum / prod / max / min over random axis subsets, keepdim both ways, on the CPU backend.

use backend_cpu::Cpu;
use tensor_core::{DType, ReduceOp};
use tests::checks::reduce;

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
