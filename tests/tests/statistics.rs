//! mean and var over random axis subsets, on the CPU backend.

use backend_cpu::Cpu;
use tensor_core::DType;
use tests::checks::statistics;

#[test]
fn mean_var_f32() {
    statistics::run(&Cpu::new(), DType::F32);
}

#[test]
fn mean_var_f64() {
    statistics::run(&Cpu::new(), DType::F64);
}
