//! arange, linspace, eye and full, on the CPU backend.

use backend_cpu::Cpu;
use tests::checks::constructors;

#[test]
fn constructors_follow_their_definitions() {
    constructors::run(&Cpu::new());
}
