//! Building the release executables of the bundle and finding them in cargo's output.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::process::{cargo, display_command};
use crate::TaskResult;

/// The executables named in cargo's `--message-format=json` output: `(target name, path)` of
/// every artifact that has an executable.
pub fn executables(json_lines: &str) -> Vec<(String, PathBuf)> {
    json_lines
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact")
        .filter_map(|msg| {
            let path = msg["executable"].as_str()?;
            let name = msg["target"]["name"].as_str()?;
            Some((name.to_string(), PathBuf::from(path)))
        })
        .collect()
}

/// Runs `cargo <args> --message-format=json-render-diagnostics` (diagnostics still shown) and
/// returns the executables of the targets `names`, in that order.
pub fn build_executables(args: &[&str], names: &[&str]) -> TaskResult<Vec<PathBuf>> {
    let mut cmd = cargo(args);
    cmd.arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    println!("==> gpu-check: {}", display_command(&cmd));
    let output = cmd
        .output()
        .map_err(|e| format!("could not start `{}`: {e}", display_command(&cmd)))?;
    if !output.status.success() {
        return Err(format!("`{}` failed ({})", display_command(&cmd), output.status).into());
    }
    let built = executables(&String::from_utf8_lossy(&output.stdout));
    names
        .iter()
        .map(|name| {
            built
                .iter()
                .find(|(target, _)| target == name)
                .map(|(_, path)| path.clone())
                .ok_or_else(|| {
                    format!("`{}` built no executable `{name}`", display_command(&cmd)).into()
                })
        })
        .collect()
}

/// Copies `src` to `dst` without its debug information (`strip --strip-debug`; a plain copy
/// when `strip` is missing). Returns the copy's size in bytes.
pub fn copy_stripped(src: &Path, dst: &Path) -> TaskResult<u64> {
    std::fs::copy(src, dst)
        .map_err(|e| format!("cannot copy {} to {}: {e}", src.display(), dst.display()))?;
    let stripped = Command::new("strip")
        .arg("--strip-debug")
        .arg(dst)
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        eprintln!(
            "gpu-check: `strip` unavailable; {} keeps its debug info",
            dst.display()
        );
    }
    Ok(std::fs::metadata(dst)
        .map_err(|e| format!("cannot stat {}: {e}", dst.display()))?
        .len())
}

/// Total size in bytes of the files under `dir`.
pub fn folder_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => folder_size(&entry.path()),
            _ => entry.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executables_are_read_from_cargo_messages() {
        let lines = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"tests"},"executable":null}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"gpu_conformance"},"executable":"/t/release/deps/gpu_conformance-1"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\nnot json\n",
        );
        assert_eq!(
            executables(lines),
            vec![(
                "gpu_conformance".to_string(),
                PathBuf::from("/t/release/deps/gpu_conformance-1")
            )]
        );
    }
}
