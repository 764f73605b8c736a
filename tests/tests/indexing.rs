//! index_select, gather and scatter_add with valid indices, on the CPU backend.

use backend_cpu::Cpu;
use tensor_core::DType;
use tests::checks::indexing::{self, IndexOp};

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
