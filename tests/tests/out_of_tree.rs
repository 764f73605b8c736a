//! A crate outside the workspace uses the harness through path dependencies: this builds and
//! runs `conformance-example` (whose whole test is one `tessera_conformance::conformance_suite!` line) with
//! cargo, sharing this workspace's target folder so that nothing already built is rebuilt.
//!
//! The nested run uses 16 cases per property: it proves the wiring (the macro, the public API,
//! the path dependencies); `conformance_example.rs` runs the same suite at the full count.

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn an_outside_crate_checks_a_backend_with_one_macro_line() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace root");
    let manifest = workspace.join("conformance-example").join("Cargo.toml");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .arg("test")
        .arg("--manifest-path")
        .arg(&manifest)
        .args(["--test", "conformance"])
        .env("CARGO_TARGET_DIR", &target)
        .env("PROPTEST_CASES", "16")
        .output()
        .expect("cargo starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the out-of-tree suite failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(
        stdout.contains("test result: ok. 20 passed"),
        "expected the 20 generated tests to pass\n{stdout}"
    );
}
