//! `where` with branches of every dtype and three-way broadcasting, on the CPU backend.

use tessera_conformance::checks::where_select;
use tessera_core::DType;
use tessera_cpu::Cpu;

#[test]
fn where_f32() {
    where_select::run(&Cpu::new(), DType::F32);
}

#[test]
fn where_f64() {
    where_select::run(&Cpu::new(), DType::F64);
}

#[test]
fn where_i64() {
    where_select::run(&Cpu::new(), DType::I64);
}

#[test]
fn where_bool() {
    where_select::run(&Cpu::new(), DType::Bool);
}
