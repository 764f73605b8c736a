//! Runs `tests/nccl_library.rs` from a plain `cargo test`: builds this crate with the `nccl`
//! feature (a nested cargo sharing this target folder; no GPU, CUDA toolkit or NCCL needed to
//! build) and runs that test, which checks the symbols of `libnccl.so.2` when it is installed.

#[test]
fn the_nccl_communicator_builds_without_a_gpu_and_finds_its_functions() {
    if cfg!(feature = "nccl") {
        println!("built with the nccl feature: tests/nccl_library.rs runs directly");
        return;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    // Unoptimised (the test looks symbols up; nothing is computed): building `-p` one package
    // resolves other dependency features than the workspace, so little of its build is
    // reused, and a whole unoptimised build takes a third of an optimised one.
    cmd.args(["--config", "profile.test.opt-level=0"])
        .args(["--config", "profile.dev.package.\"*\".opt-level=0"])
        .args(["test", "-p", "tessera-distributed", "--features", "nccl"])
        .args(["--test", "nccl_library"]);
    let exe = std::env::current_exe().expect("test binary path");
    if exe.components().any(|c| c.as_os_str() == "release") {
        cmd.arg("--release");
    }
    let out = cmd
        .args(["--", "--nocapture", "--test-threads=1"])
        .output()
        .expect("cargo starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // What the nested test found (the library and its version, or why it skipped).
    for line in stdout.lines() {
        if let Some(at) = line.find("NCCL ").or_else(|| line.find("skipped:")) {
            println!("{}", &line[at..]);
        }
    }
    assert!(
        out.status.success(),
        "the nccl build or its test failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(stdout.contains("test result: ok. 2 passed"), "{stdout}");
}
