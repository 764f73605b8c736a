//! Memory stays flat over many training steps: the resident set at the end of each of several
//! epochs of MLP training (in a `tessera-bench mem` process of its own, so no other test's
//! allocations count) grows by no more than `FLAT_TOLERANCE_BYTES` after the first epoch. The
//! check asserts on memory only, never on speed. A planted leak (a small tensor kept per step)
//! shows that the check can fail.

use std::process::Command;

use xtask::bench::record::Output;
use xtask::bench::suites::mem::{growth_after_first_epoch, FLAT_TOLERANCE_BYTES};

/// Runs the `mem` suite on the MLP (batch 16, 40 steps an epoch) for `epochs` epochs and
/// returns the resident set at the end of each.
fn rss_at_epoch_ends(epochs: u32, leak_bytes_per_step: u64) -> Vec<u64> {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera-bench"))
        .args([
            "mem",
            "--models",
            "mlp",
            "--batch",
            "16",
            "--epoch-samples",
            "640",
        ])
        .args(["--epochs", &epochs.to_string()])
        .args(["--leak-bytes-per-step", &leak_bytes_per_step.to_string()])
        .output()
        .expect("tessera-bench runs");
    assert!(
        out.status.success(),
        "tessera-bench mem failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed = Output::parse(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let epochs_line = parsed
        .info
        .iter()
        .find_map(|v| v.get("mem_epochs"))
        .expect("a mem_epochs line");
    epochs_line["rss_at_epoch_end_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

#[test]
#[cfg(target_os = "linux")]
fn resident_memory_does_not_grow_across_training_epochs() {
    let ends = rss_at_epoch_ends(6, 0);
    assert_eq!(ends.len(), 6);
    let growth = growth_after_first_epoch(&ends);
    assert!(
        growth <= FLAT_TOLERANCE_BYTES,
        "resident memory grew by {growth} bytes over 5 epochs after the first (at each end: \
         {ends:?}); allowed: {FLAT_TOLERANCE_BYTES}"
    );
}

#[test]
#[cfg(target_os = "linux")]
fn a_planted_leak_is_caught_by_the_same_check() {
    // 256 KiB kept per step: 5 epochs x 40 steps = 50 MiB after the first epoch.
    let ends = rss_at_epoch_ends(6, 256 * 1024);
    let growth = growth_after_first_epoch(&ends);
    assert!(
        growth > FLAT_TOLERANCE_BYTES,
        "a 256 KiB-per-step leak grew the resident set by only {growth} bytes: {ends:?}"
    );
}
