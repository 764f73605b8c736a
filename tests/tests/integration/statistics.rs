//! mean and var over random axis subsets, on the CPU backend.

use tessera_conformance::checks::statistics;
use tessera_core::DType;
use tessera_cpu::Cpu;

#[test]
fn mean_var_f32() {
    statistics::run(&Cpu::new(), DType::F32);
}

#[test]
fn mean_var_f64() {
    statistics::run(&Cpu::new(), DType::F64);
}
