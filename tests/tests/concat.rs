//! cat and stack of tensors of any layouts, on the CPU backend.

use backend_cpu::Cpu;
use tensor_core::DType;
use tests::checks::concat::{self, JoinOp};

#[test]
fn cat() {
    for dtype in DType::ALL {
        concat::run(&Cpu::new(), JoinOp::Cat, dtype);
    }
}

#[test]
fn stack() {
    for dtype in DType::ALL {
        concat::run(&Cpu::new(), JoinOp::Stack, dtype);
    }
}
