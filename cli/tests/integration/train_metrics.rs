//! `train --log-dir DIR`: the scalars of a run, as TensorBoard's own reader (the `tensorboard`
//! package's `EventAccumulator`) reads them from the event files, are exactly the values of
//! `metrics.jsonl` (rounded to f32, TensorBoard's scalar type), for the MLP and the GPT; and a
//! run killed and resumed shows TensorBoard the same curves as the uninterrupted run (the
//! resumed process's session start drops what the killed one logged after its checkpoint).
//! Skips, printing why, without Python's `tensorboard` (unless `TESSERA_REQUIRE_TENSORBOARD`
//! is set, as in CI) or Fashion-MNIST.

use crate::common;

use common::{data_available, summary, train, write_corpus, HALTED};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Scalars by tag: (step, value) in the order TensorBoard gives them.
type Curves = BTreeMap<String, Vec<(u64, f64)>>;

const READER: &str = r#"
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
ea.Reload()
print(json.dumps({t: [[e.step, e.value] for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}))
"#;

/// Why the test skips, if it does.
fn skip_reason() -> Option<String> {
    let found = Command::new("python3")
        .args(["-c", "import tensorboard"])
        .output()
        .is_ok_and(|o| o.status.success());
    match found {
        true => None,
        false if std::env::var_os("TESSERA_REQUIRE_TENSORBOARD").is_some() => {
            panic!("TESSERA_REQUIRE_TENSORBOARD is set but Python's tensorboard is missing")
        }
        false => Some("Python's tensorboard not found (pip install tensorboard)".into()),
    }
}

/// What TensorBoard reads from the log folder.
fn tensorboard_curves(dir: &Path) -> Curves {
    let out = Command::new("python3")
        .args(["-c", READER])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: BTreeMap<String, Vec<(u64, f64)>> = serde_json::from_slice(&out.stdout).unwrap();
    parsed
}

/// What `metrics.jsonl` holds, each value rounded to f32.
fn jsonl_curves(dir: &Path) -> Curves {
    let mut curves = Curves::new();
    for line in std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
    {
        let v: Value = serde_json::from_str(line).unwrap();
        let step = v["step"].as_u64().unwrap();
        for (tag, value) in v.as_object().unwrap() {
            if tag != "step" {
                let x = value.as_f64().map_or(f64::NAN, |x| x as f32 as f64);
                curves.entry(tag.clone()).or_default().push((step, x));
            }
        }
    }
    curves
}

/// The curves without the throughput ones (timings differ from run to run).
fn without_timings(mut curves: Curves) -> Curves {
    curves.retain(|tag, _| !tag.contains("_per_s"));
    curves
}

fn check_logs(extra: &[&str], expected_tags: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    let mut args = extra.to_vec();
    let logs_arg = logs.display().to_string();
    args.extend(["--log-dir", &logs_arg]);
    summary(&train(&tmp.path().join("run"), &args));
    let (seen, written) = (tensorboard_curves(&logs), jsonl_curves(&logs));
    assert_eq!(seen, written, "{extra:?}");
    for tag in expected_tags {
        assert!(
            seen.contains_key(*tag),
            "{extra:?}: no `{tag}` in {:?}",
            seen.keys()
        );
        assert!(seen[*tag].iter().all(|(_, v)| v.is_finite()), "{tag}");
    }

    // Killed after step 5 and resumed (from step 3): TensorBoard shows the same curves.
    let resumed_logs = tmp.path().join("resumed-logs");
    let resumed_arg = resumed_logs.display().to_string();
    let mut halted = extra.to_vec();
    halted.extend(["--log-dir", &resumed_arg, "--halt-after-step", "5"]);
    let run = tmp.path().join("resumed-run");
    assert_eq!(train(&run, &halted).status.code(), Some(HALTED));
    let mut resumed = extra.to_vec();
    resumed.extend(["--log-dir", &resumed_arg, "--resume"]);
    summary(&train(&run, &resumed));
    assert_eq!(
        without_timings(tensorboard_curves(&resumed_logs)),
        without_timings(seen),
        "{extra:?}: resumed"
    );
    assert_eq!(
        without_timings(jsonl_curves(&resumed_logs)),
        without_timings(written),
        "{extra:?}: resumed, metrics.jsonl"
    );
}

#[test]
fn tensorboard_reads_every_logged_value_of_an_mlp_run() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    if !data_available() {
        return;
    }
    // Logged every 25 steps of an epoch: use 2 epochs of 30 steps.
    let extra = [
        "--model",
        "mlp",
        "--train-limit",
        "1920",
        "--precision",
        "f16",
    ];
    let tags = [
        "train/loss",
        "train/lr",
        "train/grad_norm",
        "train/samples_per_s",
        "train/loss_scale",
        "test/accuracy",
        "test/loss",
        "train/epoch_loss",
    ];
    check_logs(&extra, &tags);
}

#[test]
fn tensorboard_reads_every_logged_value_of_a_gpt_run() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let corpus = write_corpus(tmp.path(), &"It was the best of times.\n%\n".repeat(60));
    let extra = [
        "--model",
        "gpt",
        "--data",
        &corpus,
        "--steps",
        "20",
        "--block-size",
        "8",
        "--n-layer",
        "1",
        "--n-head",
        "2",
        "--n-embd",
        "16",
        "--eval-interval",
        "5",
        "--eval-iters",
        "1",
        "--sample-chars",
        "0",
    ];
    let tags = [
        "train/loss",
        "train/lr",
        "train/grad_norm",
        "train/tokens_per_s",
        "val/loss",
        "train/estimated_loss",
    ];
    check_logs(&extra, &tags);
}
