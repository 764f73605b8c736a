//! `cargo xtask ci`: the checks CI runs, in order, stopping at the first failure.
//!
//! `.ci/run` runs the same commands in the same order; keep the two in step.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{cargo, display_command, run_checked};
use crate::TaskResult;

/// One CI check: a short name and the command that performs it.
pub struct Step {
    /// Short name printed in the progress lines and the summary.
    pub name: &'static str,
    /// The command; the step passes when it exits successfully.
    pub command: Command,
}

/// The crates outside the workspace that CI formats on its own. Their tests run from the
/// workspace's (`tests/tests/integration/out_of_tree.rs`, `tessera/tests/out_of_tree.rs`), and
/// the workspace's clippy lints their code: `facade-example`'s library is a module of
/// `tessera/tests/facade_example_source.rs`, `conformance-example`'s test is the macro line that
/// `tests/tests/integration/conformance_example.rs` runs. (A clippy pass of their own checked
/// every dependency again under their feature resolution: 190 s of CI.)
pub const EXAMPLE_CRATES: [&str; 2] = ["conformance-example", "facade-example"];

/// The features of CI's test step: MPI for the data-parallel tests' `train` and `mpi_check`,
/// NCCL's communicator for its symbol test (`distributed/tests/nccl_library.rs`).
pub const TEST_FEATURES: &str = "tessera-cli/mpi,tessera-distributed/mpi,tessera-distributed/nccl";

/// The packages meant for crates.io: `cargo package --list` must succeed for each.
pub const PUBLISHED: [&str; 12] = [
    "tessera-core",
    "tessera-cpu",
    "tessera-checked",
    "tessera-autograd",
    "tessera-derive",
    "tessera-nn",
    "tessera-conformance",
    "tessera",
    "tessera-gpu",
    "tessera-opencl",
    "tessera-cuda",
    "tessera-cli",
];

fn example_manifest(name: &str) -> String {
    format!("{name}/Cargo.toml")
}

/// The CI checks in the order they run.
pub fn steps() -> Vec<Step> {
    let mut steps = vec![
        Step {
            // No tracked file may hold an unresolved merge conflict (crate::conflicts).
            name: "conflict-markers",
            command: cargo(["xtask", "conflict-markers"]),
        },
        Step {
            name: "fmt",
            command: cargo(["fmt", "--all", "--check"]),
        },
    ];
    for (name, example) in ["fmt-conformance-example", "fmt-facade-example"]
        .into_iter()
        .zip(EXAMPLE_CRATES)
    {
        let manifest = example_manifest(example);
        steps.push(Step {
            name,
            command: cargo(["fmt", "--manifest-path", manifest.as_str(), "--check"]),
        });
    }
    steps.push(Step {
        // Every feature at once (the MPI, NCCL and CUDA code included): one pass over the
        // workspace (and the out-of-tree crates' code, see EXAMPLE_CRATES).
        name: "clippy",
        command: cargo([
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ]),
    });
    steps.push(Step {
        name: "package",
        command: {
            let mut package = cargo(["package", "--list", "--allow-dirty"]);
            for p in PUBLISHED {
                package.args(["-p", p]);
            }
            package.stdout(std::process::Stdio::null());
            package
        },
    });
    steps.push(Step {
        name: "test",
        command: {
            // Every shared kernel must compile with NVRTC: a missing NVRTC fails, not skips.
            // With MPI (Open MPI installed by the script), so that the MPI tests run the
            // `train` and `mpi_check` this build makes instead of building their own; with
            // NCCL's communicator, so that its symbol test runs without a nested build.
            let mut test = cargo(["test", "--workspace", "--features", TEST_FEATURES]);
            test.env("TESSERA_REQUIRE_NVRTC", "1");
            // The MPI tests and the NCCL symbol lookup must run, not skip.
            test.env("TESSERA_REQUIRE_MPI", "1")
                .env("TESSERA_REQUIRE_NCCL", "1")
                // The OpenCL tests must run on the CLBlast route (`libclblast1`) too.
                .env("TESSERA_REQUIRE_CLBLAST", "1")
                // TensorBoard's reader must check the event files of `train --log-dir`.
                .env("TESSERA_REQUIRE_TENSORBOARD", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            test
        },
    });
    steps.push(Step {
        // The `train` the test step built (same features and profile: nothing is rebuilt).
        name: "opencl-train",
        command: {
            let mut train = std::process::Command::new(
                crate::process::target_dir().join("debug").join("train"),
            );
            train.args(["--backend", "opencl", "--epochs", "1"]);
            train.args(["--train-limit", "4096", "--test-limit", "2000"]);
            train
        },
    });
    steps
}

/// Runs CI's [`steps`]; see [`run_steps`].
pub fn run() -> TaskResult<()> {
    run_steps(steps())
}

/// Runs `steps` in order, printing each one's name and time; fails at the first step that fails,
/// naming it and the steps not run, and runs none after it.
pub fn run_steps(mut steps: Vec<Step>) -> TaskResult<()> {
    let total = steps.len();
    let names: Vec<&'static str> = steps.iter().map(|s| s.name).collect();
    let started = Instant::now();
    let mut times: Vec<(&str, Duration)> = Vec::with_capacity(total);
    for (i, step) in steps.iter_mut().enumerate() {
        println!(
            "==> ci [{}/{total}] {}: {}",
            i + 1,
            step.name,
            display_command(&step.command)
        );
        let step_started = Instant::now();
        let outcome = run_checked(&mut step.command);
        let elapsed = step_started.elapsed();
        if let Err(e) = outcome {
            let mut msg = format!(
                "ci step `{}` failed after {:.1}s: {e}",
                step.name,
                elapsed.as_secs_f64()
            );
            let skipped = &names[i + 1..];
            if !skipped.is_empty() {
                msg.push_str(&format!("; not run: {}", skipped.join(", ")));
            }
            return Err(msg.into());
        }
        println!(
            "==> ci [{}/{total}] {} passed in {:.1}s",
            i + 1,
            step.name,
            elapsed.as_secs_f64()
        );
        times.push((step.name, elapsed));
    }
    let summary: Vec<String> = times
        .iter()
        .map(|(name, t)| format!("{name} {:.1}s", t.as_secs_f64()))
        .collect();
    println!(
        "==> ci passed in {:.1}s ({})",
        started.elapsed().as_secs_f64(),
        summary.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(name: &'static str, script: &str) -> Step {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        Step { name, command }
    }

    #[test]
    fn ci_runs_the_same_steps_as_the_ci_script() {
        let names: Vec<&str> = steps().iter().map(|s| s.name).collect();
        let script = std::fs::read_to_string(crate::process::workspace_root().join(".ci/run"))
            .expect(".ci/run is readable");
        let script_steps: Vec<&str> = script
            .lines()
            .filter_map(|line| line.strip_prefix("step "))
            .filter_map(|rest| rest.split_whitespace().next())
            .collect();
        assert_eq!(names, script_steps, "xtask ci and .ci/run disagree");
        let lines: Vec<String> = steps()
            .iter()
            .map(|s| display_command(&s.command))
            .collect();
        let line = |name: &str| &lines[names.iter().position(|n| *n == name).unwrap()];
        assert!(line("conflict-markers").ends_with("xtask conflict-markers"));
        assert!(script.contains("git grep -nIE '^(<<<<<<<|[|]{7}|>>>>>>>)( |$)'"));
        assert!(line("fmt").ends_with("fmt --all --check"));
        assert!(line("clippy")
            .ends_with("clippy --workspace --all-targets --all-features -- -D warnings"));
        assert!(line("test").ends_with(&format!("test --workspace --features {TEST_FEATURES}")));
        assert!(script.contains(&format!(
            "cargo test --workspace --features {TEST_FEATURES}"
        )));
        // The test step requires the same optional libraries in both, and the script
        // installs CLBlast.
        let steps = steps();
        let test = &steps[names.iter().position(|n| *n == "test").unwrap()].command;
        for (key, value) in test.get_envs() {
            let key = key.to_string_lossy();
            if key.starts_with("TESSERA_REQUIRE_") {
                assert_eq!(value.and_then(|v| v.to_str()), Some("1"), "{key}");
                assert!(
                    script.contains(&format!("{key}=1")),
                    ".ci/run lacks {key}=1"
                );
            }
        }
        assert!(test.get_envs().any(|(k, _)| k == "TESSERA_REQUIRE_CLBLAST"));
        assert!(
            script.contains(" libclblast1 "),
            ".ci/run does not install libclblast1"
        );
        // The same published packages in both.
        for p in PUBLISHED {
            assert!(script.contains(p), ".ci/run does not package {p}");
        }
    }

    #[test]
    fn all_steps_passing_passes() {
        assert!(run_steps(vec![shell("a", "true"), shell("b", "true")]).is_ok());
    }

    #[test]
    fn the_first_failure_stops_the_run_and_is_named() {
        let marker = std::env::temp_dir().join(format!("xtask-ci-test-{}", std::process::id()));
        let touch = format!("touch '{}'", marker.display());
        let err = run_steps(vec![
            shell("first", "true"),
            shell("second", "exit 3"),
            shell("third", &touch),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("`second` failed"), "{err}");
        assert!(err.contains("not run: third"), "{err}");
        assert!(!marker.exists(), "a step after the failure ran");
    }
}
