//! argmax / argmin (first index on ties, NaN wins), on the CPU backend.

use tessera_conformance::checks::arg_reduce;
use tessera_core::{ArgReduceOp, DType};
use tessera_cpu::Cpu;

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
