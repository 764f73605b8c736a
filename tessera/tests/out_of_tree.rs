//! An application crate outside the workspace, depending only on `tessera`: this builds and
//! runs `facade-example`'s test (a derived model trained, saved, loaded and moved to another
//! backend) with cargo, sharing this workspace's target folder.

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn an_application_crate_uses_tessera_through_the_facade_only() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tessera crate sits in the workspace root");
    let manifest = workspace.join("facade-example").join("Cargo.toml");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        // Unoptimised: the point is that the crate builds and passes, and its own workspace
        // resolves other dependency features than this one, so little of this workspace's
        // build is reused; a whole unoptimised build takes a third of an optimised one.
        .args(["--config", "profile.test.opt-level=0"])
        .args(["--config", "profile.dev.package.\"*\".opt-level=0"])
        .arg("test")
        .arg("--manifest-path")
        .arg(&manifest)
        .args(["--test", "smoke", "--", "--nocapture"])
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("cargo starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the facade example failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    println!("{stdout}");
    assert!(stdout.contains("test result: ok. 1 passed"), "{stdout}");
}
