//! Display of small (every value) and big (summarised) tensors, on the CPU backend.

use tessera_conformance::checks::display;
use tessera_cpu::Cpu;

#[test]
fn display_lists_small_tensors_and_summarises_big_ones() {
    display::run(&Cpu::new());
}
