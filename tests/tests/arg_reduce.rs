//! argmax / argmin (first index on ties, NaN wins), on the CPU backend.

use backend_cpu::Cpu;
use tensor_core::{ArgReduceOp, DType};
use tests::checks::arg_reduce;

#[test]
fn argmax() {
    for dtype in DType::ALL {
        arg_reduce::run(&Cpu::new(), ArgReduceOp::ArgMax, dtype);
    }
}

#[test]
fn argmin() {
    for dtype in DType::ALL {
        arg_reduce::run(&Cpu::new(), ArgReduceOp::ArgMin, dtype);
    }
}
