//! The bounded fuzz run CI does: a fixed, deterministic set of programs (seeds 0..3000) in two
//! memory-limited child processes. It fails on any panic, abort, hang or broken invariant and
//! prints every failing program in full with the seed that reproduces it
//! (`cargo run -p fuzz -- replay --seed N`). `cargo xtask fuzz --minutes N` is the long run.

use fuzz::driver::{run, Config, FailureKind};
use std::path::PathBuf;
use std::time::Duration;

/// Programs in the bounded run.
const PROGRAMS: u64 = 3000;

#[test]
fn a_bounded_fuzz_run_finds_no_panic_abort_hang_or_broken_invariant() {
    let config = Config {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_fuzz")),
        first_seed: 0,
        programs: Some(PROGRAMS),
        duration: None,
        jobs: 2,
        timeout: Duration::from_secs(30),
        memory_mib: 3072,
    };
    let summary = run(&config);
    let report = summary.report(&fuzz::ops::sigs()).to_string();
    println!("{report}");
    assert_eq!(summary.programs, PROGRAMS, "{report}");
    for kind in [
        FailureKind::Panic,
        FailureKind::Abort,
        FailureKind::Hang,
        FailureKind::Break,
    ] {
        assert_eq!(summary.count(kind), 0, "{kind:?}s found:\n{report}");
    }
    // A run that never reaches an Ok result tests nothing: most steps must run, and most
    // operations must succeed at least once.
    assert!(summary.ok_steps > PROGRAMS, "{report}");
    assert!(summary.err_steps > PROGRAMS, "{report}");
}
