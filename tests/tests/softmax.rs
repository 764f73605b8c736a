//! softmax, log_softmax and logsumexp, on the CPU backend.

use backend_cpu::Cpu;
use tensor_core::DType;
use tests::checks::softmax;

#[test]
fn softmax_family_f32() {
    softmax::run(&Cpu::new(), DType::F32);
}

#[test]
fn softmax_family_f64() {
    softmax::run(&Cpu::new(), DType::F64);
}
