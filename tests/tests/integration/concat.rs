//! cat and stack of tensors of any layouts, on the CPU backend.

use tessera_conformance::checks::concat::{self, JoinOp};
use tessera_core::DType;
use tessera_cpu::Cpu;

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
