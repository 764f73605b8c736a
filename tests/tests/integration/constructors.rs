//! arange, linspace, eye and full, on the CPU backend.

use tessera_conformance::checks::constructors;
use tessera_cpu::Cpu;

#[test]
fn constructors_follow_their_definitions() {
    constructors::run(&Cpu::new());
}
