//! The lifecycle report's files: `lifecycle.md`, `lifecycle.json` and `lifecycle.svg` written
//! into a folder, from records gathered in that run or read back from `*.jsonl` files of
//! `tessera-bench` output (`tessera-bench lifecycle-report DIR`, the last step of the gpu-check
//! bundle, which measures on the GPU machine itself and has no `cargo xtask` there).

use std::path::{Path, PathBuf};

use crate::bench::lifecycle::Lifecycle;
use crate::bench::plot;
use crate::bench::record::{Output, Record};
use crate::TaskResult;

/// The timed records of every `*.jsonl` file in `dir` (in file-name order; `mem` records, which
/// time nothing, are left out). A line that is not JSON is an error naming the file.
pub fn records_in(dir: &Path) -> TaskResult<Vec<Record>> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let mut records = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let out = Output::parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        records.extend(out.records.into_iter().filter(|r| r.memory.is_none()));
    }
    Ok(records)
}

/// Writes `report` as `lifecycle.md`, `lifecycle.json` and `lifecycle.svg` into `dir` (created
/// if needed); returns the Markdown and the three paths.
pub fn write_files(
    report: &Lifecycle,
    machine: &str,
    dir: &Path,
) -> TaskResult<(String, [PathBuf; 3])> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let markdown = report.to_markdown(machine);
    let md = dir.join("lifecycle.md");
    std::fs::write(&md, &markdown).map_err(|e| format!("cannot write {}: {e}", md.display()))?;
    let json = dir.join("lifecycle.json");
    let mut value = report.to_json();
    value["machine"] = serde_json::json!(machine);
    let text = serde_json::to_string_pretty(&value)? + "\n";
    std::fs::write(&json, text).map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    let svg = dir.join("lifecycle.svg");
    plot::write_svg(report, machine, &svg)?;
    Ok((markdown, [md, json, svg]))
}

/// `tessera-bench lifecycle-report DIR`: the report of every record file in `dir`, written
/// beside them; returns the Markdown. Errors when `dir` holds no timed record.
pub fn report_folder(dir: &Path, machine: &str) -> TaskResult<String> {
    let records = records_in(dir)?;
    if records.is_empty() {
        return Err(format!("no timed records in {}/*.jsonl", dir.display()).into());
    }
    let report = Lifecycle::from_records(&records);
    Ok(write_files(&report, machine, dir)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::timing::Timing;

    fn line(backend: &str, precision: Option<&str>, phase: &str, s: f64) -> String {
        let t = Timing::from_samples(&[s]).unwrap();
        let mut r = Record::new("mlp", "tessera", backend, 128, &t)
            .with_samples()
            .with_model("mlp")
            .with_phase(phase);
        r.precision = precision.map(str::to_string);
        r.to_json_line()
    }

    #[test]
    fn a_folder_of_record_files_becomes_the_report_files() {
        let dir = std::env::temp_dir().join(format!("lifecycle-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let info = r#"{"tessera_info":{"rayon_threads":16}}"#;
        std::fs::write(
            dir.join("cpu.jsonl"),
            format!("{info}\n{}\n", line("cpu", None, "train", 0.05)),
        )
        .unwrap();
        std::fs::write(
            dir.join("cuda-bf16.jsonl"),
            format!("{info}\n{}\n", line("cuda", Some("bf16"), "train", 0.001)),
        )
        .unwrap();
        std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
        let md = report_folder(&dir, "test GPU machine").unwrap();
        assert!(md.starts_with("Machine: test GPU machine"), "{md}");
        assert!(
            md.contains("cuda bf16 speedup") && md.contains("50.00x"),
            "{md}"
        );
        for name in ["lifecycle.md", "lifecycle.json", "lifecycle.svg"] {
            assert!(dir.join(name).is_file(), "{name}");
        }
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("lifecycle.json")).unwrap())
                .unwrap();
        assert_eq!(json["machine"], "test GPU machine");
        std::fs::write(dir.join("bad.jsonl"), "not json\n").unwrap();
        let err = report_folder(&dir, "m").unwrap_err().to_string();
        assert!(err.contains("bad.jsonl"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_empty_folder_is_an_error() {
        let dir = std::env::temp_dir().join(format!("lifecycle-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(report_folder(&dir, "m").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
