//! softmax, log_softmax and logsumexp, on the CPU backend.

use tessera_conformance::checks::softmax;
use tessera_core::DType;
use tessera_cpu::Cpu;

#[test]
fn softmax_family_f32() {
    softmax::run(&Cpu::new(), DType::F32);
}

#[test]
fn softmax_family_f64() {
    softmax::run(&Cpu::new(), DType::F64);
}
