//! Chains of views (reshape round trips, permute, narrow, squeeze/unsqueeze, flatten,
//! contiguous) on tensors of any layout, on the CPU backend.

use tessera_conformance::checks::views;
use tessera_core::DType;
use tessera_cpu::Cpu;

#[test]
fn views_f32() {
    views::run(&Cpu::new(), DType::F32);
}

#[test]
fn views_i64() {
    views::run(&Cpu::new(), DType::I64);
}

#[test]
fn views_bool() {
    views::run(&Cpu::new(), DType::Bool);
}
