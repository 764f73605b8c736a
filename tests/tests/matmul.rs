//! Matrix products (rank-1 operands, batch broadcasting, transposed operands), on the CPU
//! backend.

use backend_cpu::Cpu;
use tensor_core::DType;
use tests::checks::matmul;

#[test]
fn matmul_f32() {
    matmul::run(&Cpu::new(), DType::F32);
}

#[test]
fn matmul_f64() {
    matmul::run(&Cpu::new(), DType::F64);
}
