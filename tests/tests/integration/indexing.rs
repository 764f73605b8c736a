//! index_select, gather and scatter_add with valid indices, on the CPU backend.

use tessera_conformance::checks::indexing::{self, IndexOp};
use tessera_core::DType;
use tessera_cpu::Cpu;

#[test]
fn index_select() {
    for dtype in DType::ALL {
        indexing::run(&Cpu::new(), IndexOp::IndexSelect, dtype);
    }
}

#[test]
fn gather() {
    for dtype in DType::ALL {
        indexing::run(&Cpu::new(), IndexOp::Gather, dtype);
    }
}

#[test]
fn scatter_add() {
    for dtype in [DType::F32, DType::F64, DType::I64] {
        indexing::run(&Cpu::new(), IndexOp::ScatterAdd, dtype);
    }
}
