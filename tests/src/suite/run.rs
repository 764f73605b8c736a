//! Running the suite: every declared (op, dtype) cell of a family, the coverage matrix, and the
//! assertion the generated tests make.

use super::capabilities::Capabilities;
use super::cell::check_cell;
use super::coverage::{Coverage, Outcome};
use super::op::Family;
use crate::runner::RunConfig;
use std::path::PathBuf;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tessera_core::{Backend, DType};

/// The configuration of one backend's run: regressions go to a folder named after the backend,
/// so that two backends checked by one crate keep separate files.
fn for_backend<B: Backend>(dev: &B, config: &RunConfig) -> RunConfig {
    RunConfig {
        regressions: config.regressions.as_ref().map(|d| d.join(dev.name())),
        ..config.clone()
    }
}

/// Checks every declared cell of `family` on `dev`; returns the matrix (never panics on a
/// wrong result: a panic inside the backend counts as a failure of its cell).
pub fn run_family<B: Backend>(
    dev: &B,
    family: Family,
    capabilities: &Capabilities,
    config: &RunConfig,
) -> Coverage {
    let config = for_backend(dev, config);
    let mut coverage = Coverage::new(dev.name());
    for op in family.ops() {
        for dtype in DType::ALL {
            let outcome = if !op.defined_for().contains(&dtype) {
                Outcome::Undefined
            } else if !capabilities.declares(op, dtype) {
                Outcome::Unsupported
            } else {
                match check_cell(dev, op, dtype, &config) {
                    Ok(()) => Outcome::Pass,
                    Err(counterexample) => {
                        coverage.failures.push(counterexample);
                        Outcome::Fail
                    }
                }
            };
            coverage.record(op, dtype, outcome);
        }
    }
    coverage
}

/// Every family, one after the other: the whole matrix.
pub fn run_all<B: Backend>(dev: &B, capabilities: &Capabilities, config: &RunConfig) -> Coverage {
    let mut coverage = Coverage::new(dev.name());
    for family in Family::ALL {
        coverage.extend(run_family(dev, family, capabilities, config));
    }
    coverage
}

/// Where the matrix of a family is written:
/// `<target>/<profile>/conformance/<test binary>/<backend>/<family>.txt`, next to the test
/// executable (`None` when that folder cannot be found).
pub fn report_path(backend: &str, family: Family) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    // target/<profile>/deps/<test>-<hash>: the test's name and target/<profile>.
    let stem = exe.file_stem()?.to_string_lossy().into_owned();
    let test = stem
        .rsplit_once('-')
        .map_or(stem.as_str(), |(name, _)| name)
        .to_string();
    let profile_dir = exe.parent()?.parent()?;
    Some(
        profile_dir
            .join("conformance")
            .join(test)
            .join(backend)
            .join(format!("{}.txt", family.name())),
    )
}

/// Held by every family that [`assert_family`] runs in this process: shared by all of them but
/// the `errors` family, which holds it alone. A GPU backend reports a bad index asynchronously,
/// through a device-wide flag that the next `synchronize` or read-back of *any* thread reads:
/// while the errors family makes such calls, another family's test running in parallel (the
/// macro's tests are threads of one process) would take the error as its own, and the errors
/// family would see none. Tests that call `checks::*::run` directly, outside `assert_family`,
/// do not hold it: run the errors family alone in its own test binary next to them.
static DEVICE_ERROR_FLAG: RwLock<()> = RwLock::new(());

/// The guard of [`DEVICE_ERROR_FLAG`] a family holds while it runs.
enum FamilyGuard {
    /// The errors family: alone.
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
    /// Every other family: together.
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
}

impl FamilyGuard {
    /// Waits for the guard `family` needs (a panicking family does not poison the others).
    fn acquire(family: Family) -> Self {
        if family == Family::Errors {
            FamilyGuard::Exclusive(DEVICE_ERROR_FLAG.write().unwrap_or_else(|e| e.into_inner()))
        } else {
            FamilyGuard::Shared(DEVICE_ERROR_FLAG.read().unwrap_or_else(|e| e.into_inner()))
        }
    }
}

/// What a generated test does: runs `family`, writes the matrix to [`report_path`], and
/// either prints it (visible with `--nocapture`) or, if a declared cell failed, panics with the
/// matrix and every shrunk counterexample (once: the panic message is the report). The errors
/// family runs alone among the families of this process (see [`DEVICE_ERROR_FLAG`]).
pub fn assert_family<B: Backend>(
    dev: &B,
    family: Family,
    capabilities: &Capabilities,
    config: &RunConfig,
) {
    let guard = FamilyGuard::acquire(family);
    let coverage = run_family(dev, family, capabilities, config);
    drop(guard);
    let text = coverage.to_string();
    // Printed once: on success here (visible with `--nocapture`), on failure only in the panic
    // message (which the test harness prints after the captured output, so printing it here
    // too would show every report twice).
    if coverage.passed() {
        eprintln!("{text}");
    }
    if let Some(path) = report_path(dev.name(), family) {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(&path, format!("{text}\n"));
    }
    assert!(
        coverage.passed(),
        "conformance family `{family}` failed on backend `{}`\n{text}",
        dev.name()
    );
}
