//! Finding the workspace and running child processes for the tasks.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::TaskResult;

/// The workspace root: the folder above this crate's manifest.
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the xtask crate lives inside the workspace")
}

/// The workspace's target folder: `$CARGO_TARGET_DIR` when set (relative to the current folder,
/// as cargo reads it), else `<root>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => workspace_root().join("target"),
    }
}

/// A `cargo` command (the same cargo that runs xtask, via `$CARGO`) working in the workspace root.
pub fn cargo<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(workspace_root());
    cmd
}

/// The command line of `cmd` as a user would type it (program name without its folder).
pub fn display_command(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program())
        .file_name()
        .unwrap_or(cmd.get_program())
        .to_string_lossy()
        .into_owned();
    std::iter::once(program)
        .chain(cmd.get_args().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `cmd` with inherited stdio and fails unless it exits successfully.
pub fn run_checked(cmd: &mut Command) -> TaskResult<()> {
    let status = cmd
        .status()
        .map_err(|e| format!("could not start `{}`: {e}", display_command(cmd)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({status})", display_command(cmd)).into())
    }
}

/// Runs `cmd` with its output captured and returns its stdout; fails, quoting its stderr, unless
/// it exits successfully.
pub fn output_checked(cmd: &mut Command) -> TaskResult<String> {
    let out = cmd
        .output()
        .map_err(|e| format!("could not start `{}`: {e}", display_command(cmd)))?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed ({}): {}",
            display_command(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
