//! Counter-based random draws and their moments, on the CPU backend.

use backend_cpu::Cpu;
use tests::checks::random;
use tests::checks::FLOAT_DTYPES;

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
