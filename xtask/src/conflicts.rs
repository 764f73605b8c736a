//! `cargo xtask conflict-markers`: fails when a tracked file still holds the markers of an
//! unresolved merge conflict.
//!
//! A conflict is a line starting with seven `<` and a space (or nothing), the two sides, and a
//! line starting with seven `>`; diff3 style adds a base section opened by seven `|`. Those
//! lines are flagged wherever they appear. A line of seven `=` is flagged only inside an open
//! conflict: alone it is also a Markdown heading underline. `.ci/run` does the same check with
//! `git grep` (its `conflict-markers` step).

use std::process::Command;

use crate::process::workspace_root;
use crate::TaskResult;

/// The marker that opens a conflict, the diff3 base section, the separator, and the closer.
const OPEN: &str = "<<<<<<<";
const BASE: &str = "|||||||";
const SEPARATOR: &str = "=======";
const CLOSE: &str = ">>>>>>>";

/// Whether `line` is `marker` alone or followed by a space (and a label).
fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
}

/// The conflict-marker lines of `text`: `(line number from 1, line)`.
pub fn conflict_markers(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let marker = if is_marker(line, OPEN) {
            open = true;
            true
        } else if is_marker(line, CLOSE) {
            open = false;
            true
        } else {
            is_marker(line, BASE) || (open && line == SEPARATOR)
        };
        if marker {
            found.push((i + 1, line.to_string()));
        }
    }
    found
}

/// Every tracked file of the repository (paths relative to its root), from `git ls-files`.
fn tracked_files() -> TaskResult<Vec<String>> {
    let output = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(workspace_root())
        .output()
        .map_err(|e| format!("git ls-files did not start: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "git ls-files failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(output
        .stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

/// Checks every tracked text file; fails listing each marker as `path:line: marker`. Files that
/// are not UTF-8 (binary data) and tracked files deleted from the working tree are skipped.
pub fn run() -> TaskResult<()> {
    let root = workspace_root();
    let mut report = Vec::new();
    for path in tracked_files()? {
        let Ok(text) = std::fs::read_to_string(root.join(&path)) else {
            continue;
        };
        for (line, marker) in conflict_markers(&text) {
            report.push(format!("{path}:{line}: {marker}"));
        }
    }
    if report.is_empty() {
        println!("no conflict markers in the tracked files");
        Ok(())
    } else {
        Err(format!("unresolved merge-conflict markers:\n{}", report.join("\n")).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_conflict_is_flagged_line_by_line() {
        // Built with `concat!` so that this file holds no marker at the start of a line.
        let text = concat!(
            "# Title\n",
            "<",
            "<<<<<< HEAD\n",
            "ours\n",
            "|",
            "|||||| base\n",
            "base\n",
            "=",
            "======\n",
            "theirs\n",
            ">",
            ">>>>>> other-branch\n",
            "after\n",
        );
        let lines: Vec<usize> = conflict_markers(text).iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [2, 4, 6, 8]);
        // Markers without a label, and Windows line ends.
        let bare = concat!(
            "<",
            "<<<<<<\r\n",
            "a\r\n",
            "=",
            "======\r\n",
            ">",
            ">>>>>>\r\n"
        );
        assert_eq!(conflict_markers(bare).len(), 3);
    }

    #[test]
    fn normal_files_are_not_flagged() {
        let text = concat!(
            "Title\n",
            "=",
            "======\n", // a Markdown underline of seven `=`, outside any conflict
            "Longer title\n",
            "============\n",
            "<",
            "<<<<<<<< more than seven are not a marker\n",
            "a <",
            "<<<<<< b in the middle of a line\n",
            "    >",
            ">>>>>> indented\n",
            "let shift = 1 << 3;\n",
        );
        assert_eq!(conflict_markers(text), Vec::<(usize, String)>::new());
    }

    #[test]
    fn the_repository_has_no_conflict_markers() {
        run().unwrap();
    }
}
