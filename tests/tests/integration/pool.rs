//! Max and average pooling and their gradients, on the CPU backend.

use tessera_conformance::checks::pool::{self, PoolOp};
use tessera_conformance::checks::FLOAT_DTYPES;
use tessera_cpu::Cpu;

macro_rules! pool_tests {
    ($($name:ident: $op:ident;)*) => {
        $(
            #[test]
            fn $name() {
                for dtype in FLOAT_DTYPES {
                    pool::run(&Cpu::new(), PoolOp::$op, dtype);
                }
            }
        )*
    };
}

pool_tests! {
    max_pool2d: Max;
    avg_pool2d: Avg;
    max_pool2d_backward: MaxBackward;
    avg_pool2d_backward: AvgBackward;
}
