//! The job behind `train --model gpt` on a small text: it learns, is reproducible for a seed,
//! writes a checkpoint folder that `generate` reads, and explains missing data.

use std::process::Command;
use tessera_cli::gpt_job::{run_gpt_training, GptTrainConfig};
use tessera_cpu::Cpu;

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
