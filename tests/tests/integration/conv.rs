//! conv2d and its input and weight gradients, on the CPU backend.

use tessera_conformance::checks::conv::{self, ConvOp};
use tessera_conformance::checks::FLOAT_DTYPES;
use tessera_cpu::Cpu;

#[test]
fn conv2d_forward() {
    for dtype in FLOAT_DTYPES {
        conv::run(&Cpu::new(), ConvOp::Forward, dtype);
    }
}

#[test]
fn conv2d_backward_input() {
    for dtype in FLOAT_DTYPES {
        conv::run(&Cpu::new(), ConvOp::BackwardInput, dtype);
    }
}

#[test]
fn conv2d_backward_weight() {
    for dtype in FLOAT_DTYPES {
        conv::run(&Cpu::new(), ConvOp::BackwardWeight, dtype);
    }
}
