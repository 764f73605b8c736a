//! Matrix products (rank-1 operands, batch broadcasting, transposed operands), on the CPU
//! backend.

use tessera_conformance::checks::matmul;
use tessera_core::DType;
use tessera_cpu::Cpu;

#[test]
fn matmul_f32() {
    matmul::run(&Cpu::new(), DType::F32);
}

#[test]
fn matmul_f64() {
    matmul::run(&Cpu::new(), DType::F64);
}
