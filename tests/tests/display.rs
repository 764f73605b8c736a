//! Display of small (every value) and big (summarised) tensors, on the CPU backend.

use backend_cpu::Cpu;
use tests::checks::display;

#[test]
fn display_lists_small_tensors_and_summarises_big_ones() {
    display::run(&Cpu::new());
}
