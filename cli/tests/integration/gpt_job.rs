//! The job behind `train --model gpt` on a small text: it learns, is reproducible for a seed,
//! writes a checkpoint folder that `generate` reads, explains missing data, and learns as f32
//! does under `--precision bf16|f16`.

use std::process::Command;
use tessera_cli::gpt_job::{run_gpt_training, GptTrainConfig};
use tessera_cpu::Cpu;
use tessera_nn::precision::Precision;

fn quick(data: &std::path::Path, save: Option<std::path::PathBuf>) -> GptTrainConfig {
    let mut config = GptTrainConfig::new(data, save);
    let a = &mut config.args;
    (a.steps, a.block_size, a.n_layer, a.n_head, a.n_embd) = (40, 16, 1, 2, 32);
    (
        a.eval_interval,
        a.eval_iters,
        a.warmup_steps,
        a.sample_chars,
    ) = (20, 2, 5, 40);
    config.batch_size = 8;
    config
}

fn corpus(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("corpus.txt");
    let text = "To be or not to be, that is the question.\n%\n".repeat(60);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn it_learns_checkpoints_and_generate_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = corpus(dir.path());
    let ckpt = dir.path().join("ckpt");
    let report = run_gpt_training(&quick(&data, Some(ckpt.clone())), &Cpu::new()).unwrap();
    let steps: Vec<usize> = report.evals.iter().map(|e| e.step).collect();
    assert_eq!(steps, [0, 20, 40]);
    let (first, last) = (&report.evals[0], report.last());
    assert!(
        last.val_loss < first.val_loss - 1.0,
        "{first:?} -> {last:?}"
    );
    assert!(report.tokens_per_s > 0.0 && report.sample.chars().count() == 40);
    for file in ["model.safetensors", "vocab.json", "config.json"] {
        assert!(ckpt.join(file).is_file(), "{file}");
    }
    // Same seed, same run.
    let again = run_gpt_training(&quick(&data, None), &Cpu::new()).unwrap();
    assert_eq!(again.evals, report.evals);

    let out = Command::new(env!("CARGO_BIN_EXE_generate"))
        .args([
            "--checkpoint",
            ckpt.to_str().unwrap(),
            "--prompt",
            "To be",
            "--tokens",
            "30",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("To be"), "{stdout}");
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["tokens"], 30);
    assert!(summary["first_token_ms"].as_f64().unwrap() > 0.0);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("tokens/s"), "{stderr}");

    // Any backend of the registry reaches `generate`: checked against the CPU, the CPU's text.
    let out = Command::new(env!("CARGO_BIN_EXE_generate"))
        .args(["--checkpoint", ckpt.to_str().unwrap(), "--prompt", "To be"])
        .args(["--tokens", "30", "--backend", "checked-cpu"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let checked = String::from_utf8(out.stdout).unwrap();
    let text = |out: &str| out.lines().rev().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(text(&checked), text(&stdout));

    // A prompt outside the vocabulary is refused, naming the character.
    let out = Command::new(env!("CARGO_BIN_EXE_generate"))
        .args(["--checkpoint", ckpt.to_str().unwrap(), "--prompt", "Zebra"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'Z'"));
}

#[test]
fn missing_data_says_what_to_do() {
    let config = quick(std::path::Path::new("/nonexistent/tessera-text"), None);
    let err = run_gpt_training(&config, &Cpu::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/nonexistent/tessera-text") && err.contains("--data"),
        "{err}"
    );
}

#[test]
fn bf16_and_f16_gpts_learn_like_f32() {
    let dir = tempfile::tempdir().unwrap();
    let data = corpus(dir.path());
    let f32_run = run_gpt_training(&quick(&data, None), &Cpu::new()).unwrap();
    let (start, reference) = (f32_run.evals[0].val_loss, f32_run.last().val_loss);
    for precision in [Precision::BF16, Precision::F16] {
        let config = GptTrainConfig {
            precision,
            ..quick(&data, None)
        };
        let run = run_gpt_training(&config, &Cpu::new()).unwrap();
        let (first, last) = (run.evals[0].val_loss, run.last().val_loss);
        eprintln!(
            "{precision}: val loss {first:.6} -> {last:.6} (f32 {start:.6} -> {reference:.6}), \
             {} skipped steps",
            run.skipped_steps
        );
        // The 16-bit layers round differently from f32 (the policy was applied).
        assert_ne!(
            run.evals, f32_run.evals,
            "{precision} trained exactly as f32"
        );
        // The same initial model: the first estimate differs by rounding only.
        assert!(
            (first - start).abs() < 0.02,
            "{precision}: {first} vs {start}"
        );
        // Learns as much as f32 does (the text is learned from ~3.3 to well under 2 nats; a
        // broken policy or scaler stays near the start), to within a few percent.
        assert!(
            (last - reference).abs() <= 0.05 * (start - reference),
            "{precision}: val loss {last} vs f32 {reference}"
        );
        // f16's scaler skips a few early overflowing steps at most; bf16 has no scaler.
        match precision {
            Precision::F16 => assert!(run.skipped_steps <= 8, "{}", run.skipped_steps),
            _ => assert_eq!(run.skipped_steps, 0),
        }
    }
}

#[test]
fn the_train_command_trains_a_gpt_in_bf16() {
    let dir = tempfile::tempdir().unwrap();
    let data = corpus(dir.path());
    let ckpt = dir.path().join("ckpt");
    let args = [
        "--model",
        "gpt",
        "--precision",
        "bf16",
        "--data",
        data.to_str().unwrap(),
        "--save",
        ckpt.to_str().unwrap(),
        "--steps",
        "4",
        "--block-size",
        "8",
        "--n-layer",
        "1",
        "--n-head",
        "2",
        "--n-embd",
        "16",
        "--eval-interval",
        "4",
        "--eval-iters",
        "1",
        "--sample-chars",
        "0",
        "--batch-size",
        "2",
    ];
    let out = Command::new(env!("CARGO_BIN_EXE_train"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["precision"], "bf16");
    assert!(summary["val_loss"].as_f64().unwrap().is_finite());
    // The checkpoint records the policy, so `generate` decodes under it.
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ckpt.join("config.json")).unwrap()).unwrap();
    assert_eq!(info["model"]["precision"], "bf16");
    assert_eq!(info["training"]["precision"], "bf16");
}
