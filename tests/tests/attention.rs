//! Scaled dot-product attention (forward and gradient) on the CPU backend, whose fused kernels
//! override the composite, and on the example backend, which keeps the composite default.

use tessera_backend_example::ExampleBackend;
use tessera_conformance::checks::attention::{self, AttentionOp};
use tessera_core::DType;
use tessera_cpu::Cpu;

#[test]
fn attention_on_the_cpu() {
    for op in AttentionOp::ALL {
        for dtype in [DType::F32, DType::F64] {
            attention::run(&Cpu::new(), op, dtype);
        }
    }
}

#[test]
fn attention_composite_on_the_example_backend() {
    for op in AttentionOp::ALL {
        for dtype in [DType::F32, DType::F64] {
            attention::run(&ExampleBackend::new(), op, dtype);
        }
    }
}

#[test]
fn attention_through_the_checked_backend() {
    let dev = tessera_checked::Checked::new(Cpu::new(), Cpu::new());
    for op in AttentionOp::ALL {
        attention::run(&dev, op, DType::F64);
    }
}
