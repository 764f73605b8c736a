//! `--backend NAME` of both binaries comes from `tessera::registry`: the help lists the
//! backends of this build, an unknown name is refused listing them, and a backend this build
//! lacks is refused naming the Cargo feature that adds it. (`gpt_job.rs` runs `generate` on a
//! checked backend; `train_job.rs` and `opencl_precision.rs` train on the others.)

use std::process::Command;
use tessera::registry::{self, BackendEntry};

/// Runs `binary` with `args`: whether it succeeded, and its stderr.
fn run(binary: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(binary).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const BINARIES: [&str; 2] = [env!("CARGO_BIN_EXE_train"), env!("CARGO_BIN_EXE_generate")];

#[test]
fn an_unknown_backend_is_refused_listing_the_available_ones() {
    let names: Vec<&str> = registry::enabled().map(BackendEntry::name).collect();
    assert_eq!(names[..2], ["cpu", "opencl"]);
    for binary in BINARIES {
        let (ok, stderr) = run(binary, &["--backend", "tpu"]);
        assert!(!ok, "{binary}");
        let expected = format!(
            "invalid value 'tpu' for '--backend <BACKEND>': unknown backend `tpu`; available: {}",
            names.join(", ")
        );
        assert!(stderr.contains(&expected), "{binary}: {stderr}");
    }
}

#[test]
fn a_backend_this_build_lacks_names_its_feature() {
    let Some(absent) = registry::all().find(|b| !b.is_enabled()) else {
        return; // built with every feature
    };
    for binary in BINARIES {
        let (ok, stderr) = run(binary, &["--backend", absent.name()]);
        assert!(!ok, "{binary}");
        assert!(stderr.contains("not in this build"), "{binary}: {stderr}");
        for feature in absent.missing_features() {
            let flag = format!("--features {feature}");
            assert!(stderr.contains(&flag), "{binary}: {stderr}");
        }
    }
}

#[test]
fn the_help_lists_every_backend_of_the_build_with_its_line() {
    for binary in BINARIES {
        let out = Command::new(binary).arg("--help").output().unwrap();
        assert!(out.status.success(), "{binary}");
        let help = String::from_utf8_lossy(&out.stdout);
        for backend in registry::enabled() {
            let entry = format!("- {}:", backend.name());
            assert!(help.contains(&entry), "{binary}: {help}");
            assert!(help.contains(backend.about()), "{binary}: {help}");
        }
    }
}
