//! Counter-based random draws and their moments, on the CPU backend.

use tessera_conformance::checks::random;
use tessera_conformance::checks::FLOAT_DTYPES;
use tessera_cpu::Cpu;

#[test]
fn draws_match_the_counter_based_samples() {
    for dtype in FLOAT_DTYPES {
        random::run(&Cpu::new(), dtype);
    }
}

#[test]
fn large_draws_have_the_right_moments() {
    random::check_moments(&Cpu::new());
}
