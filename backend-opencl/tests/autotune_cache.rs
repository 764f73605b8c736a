//! The GEMM configuration is timed once per device and then read from the disk cache: a second
//! process with the same cache folder gets the same choice without timing anything (no host
//! synchronisation).

mod common;

use std::process::Command;
use tessera_core::DType;
use tessera_opencl::autotune::{CACHE_ENV_VAR, TILES_ENV_VAR};

const CHILD_VAR: &str = "TESSERA_OPENCL_TEST_CHILD";

/// In the child: the chosen configuration and the synchronisations spent choosing it.
#[test]
fn child_reports_its_choice() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let dev = tessera_opencl::OpenCl::new().unwrap();
    let before = dev.stats().host_syncs;
    let config = dev.gemm_config(DType::F32).unwrap();
    eprintln!("choice={config} syncs={}", dev.stats().host_syncs - before);
}

/// Runs `child_reports_its_choice` with `cache` as the cache folder; returns (choice, syncs).
fn child(cache: &std::path::Path) -> (String, u64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_reports_its_choice", "--nocapture"])
        .env(CHILD_VAR, "1")
        .env(CACHE_ENV_VAR, cache)
        .env_remove(TILES_ENV_VAR)
        .env_remove("TESSERA_OPENCL_AUTOTUNE")
        .output()
        .unwrap();
    assert!(out.status.success(), "child failed: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("choice="))
        .unwrap_or_else(|| panic!("no choice in {stderr}"));
    let (choice, syncs) = line.split_once(" syncs=").unwrap();
    (choice.to_string(), syncs.parse().unwrap())
}

#[test]
fn the_tuned_configuration_is_cached_on_disk() {
    if std::env::var_os(CHILD_VAR).is_some() || common::device().is_none() {
        return;
    }
    let cache = std::env::temp_dir().join(format!("tessera-tune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let (first, first_syncs) = child(&cache);
    assert!(first_syncs > 0, "tuning times kernels, so it waits");
    let file = std::fs::read_to_string(cache.join("opencl-gemm-tiles.txt")).unwrap();
    assert!(
        file.lines().any(|l| l.ends_with(&format!("\t{first}"))),
        "{file}"
    );
    let (second, second_syncs) = child(&cache);
    assert_eq!(second, first);
    assert_eq!(second_syncs, 0, "a cached choice needs no timing");
    let _ = std::fs::remove_dir_all(&cache);
}
