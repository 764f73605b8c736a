//! The Hugging Face fixtures (`fixtures/hf/`) through the binaries: `generate --model-dir`
//! (greedy decoding gives the 64 tokens `transformers` generated, the summary carries the ids
//! and text, generation stops at the end-of-text token, a bad folder is a clean error) and
//! `train --init-from` (fine-tuning lowers the loss and saves a folder `generate` reads).

use crate::common::summary;
use std::path::PathBuf;
use std::process::Command;
use tessera_cpu::Cpu;
use tessera_tokenizer::Tokenizer;

fn fixture(name: &str) -> PathBuf {
    crate::common::hf_fixture(name)
}

fn generate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_generate"))
        .args(args)
        .output()
        .unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

#[test]
fn greedy_generation_from_a_model_folder_is_that_of_transformers() {
    for name in ["gpt2-tiny", "llama-tiny"] {
        let dir = fixture(name);
        let reference =
            tessera_nn::checkpoint::load(dir.join("reference.safetensors"), &Cpu::new()).unwrap();
        let prompt_ids = reference.tensors["greedy_prompt"].to_vec::<i64>().unwrap();
        let expected = reference.tensors["greedy_new_tokens"]
            .to_vec::<i64>()
            .unwrap();
        // The prompt as text: the reference ids decoded (the tokenizer adds Llama's BOS back).
        let tokenizer = Tokenizer::from_folder(&dir).unwrap();
        let as_u32: Vec<u32> = prompt_ids.iter().map(|&t| t as u32).collect();
        let prompt = tokenizer.decode(&as_u32, true).unwrap();
        let out = generate(&[
            "--model-dir",
            dir.to_str().unwrap(),
            "--prompt",
            &prompt,
            "--tokens",
            "64",
            "--temperature",
            "0",
            "--ignore-eos",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = summary(&out);
        assert_eq!(
            ids(&s["prompt_token_ids"]),
            prompt_ids,
            "{name}: the prompt re-encodes"
        );
        assert_eq!(ids(&s["token_ids"]), expected, "{name}");
        let text = tokenizer.decode(
            &expected.iter().map(|&t| t as u32).collect::<Vec<_>>(),
            true,
        );
        assert_eq!(s["text"].as_str().unwrap(), text.unwrap(), "{name}");
        assert_eq!(
            s["model_type"],
            if name == "gpt2-tiny" { "gpt2" } else { "llama" }
        );
    }
}

/// Greedy ids of `model` after `prompt`, decoded through its cache.
fn greedy_ids(
    model: &tessera_nn::pretrained::PretrainedModel<Cpu>,
    prompt: &[i64],
    n: usize,
) -> Vec<i64> {
    use tessera_core::Tensor;
    let dev = Cpu::new();
    let mut cache = model.new_cache(1).unwrap();
    let ids = Tensor::from_vec(prompt.to_vec(), [1, prompt.len()], &dev).unwrap();
    let mut logits = model.forward_cached(&ids, &mut cache).unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let last = logits.narrow(1, logits.dims()[1] - 1, 1).unwrap();
        let next = last.argmax(-1, false).unwrap().to_vec::<i64>().unwrap()[0];
        out.push(next);
        let idx = Tensor::from_vec(vec![next], [1, 1], &dev).unwrap();
        logits = model.forward_cached(&idx, &mut cache).unwrap();
    }
    out
}

#[test]
fn bf16_generation_loads_bf16_weights_unless_told_otherwise() {
    use tessera_core::DType;
    use tessera_nn::precision::Precision;
    use tessera_nn::pretrained::{PretrainedModel, PretrainedOptions};
    let dir = fixture("llama-tiny");
    for (extra, dtype) in [(None, DType::BF16), (Some("f32"), DType::F32)] {
        let mut args = vec![
            "--model-dir",
            dir.to_str().unwrap(),
            "--prompt",
            "A bird in the hand",
            "--tokens",
            "12",
            "--temperature",
            "0",
            "--ignore-eos",
            "--precision",
            "bf16",
        ];
        if let Some(word) = extra {
            args.extend(["--dtype", word]);
        }
        let out = generate(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = summary(&out);
        assert_eq!(s["weight_dtype"], dtype.name(), "{extra:?}");
        assert_eq!(s["precision"], "bf16");
        // The same tokens as the library's model loaded that way.
        let options = PretrainedOptions {
            dtype,
            precision: Precision::BF16,
        };
        let model = PretrainedModel::from_pretrained(&dir, &Cpu::new(), &options).unwrap();
        let expected = greedy_ids(&model, &ids(&s["prompt_token_ids"]), 12);
        assert_eq!(ids(&s["token_ids"]), expected, "{extra:?}");
    }
    let out = generate(&["--model-dir", dir.to_str().unwrap(), "--dtype", "i64"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a weight dtype"), "{err}");
}

#[test]
fn generation_stops_at_the_end_of_text_token() {
    // Sampling at a high temperature from the random tiny model reaches `<|endoftext|>` (id
    // 0) within a few hundred tokens for some seed; the run must end right there.
    let dir = fixture("gpt2-tiny");
    let mut stopped = 0;
    for seed in 0..8 {
        let out = generate(&[
            "--model-dir",
            dir.to_str().unwrap(),
            "--prompt",
            "A",
            "--tokens",
            "120",
            "--temperature",
            "3",
            "--seed",
            &seed.to_string(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = summary(&out);
        let tokens = ids(&s["token_ids"]);
        let eos_at = tokens.iter().position(|&t| t == 0);
        if s["stopped_at_eos"].as_bool().unwrap() {
            stopped += 1;
            assert_eq!(eos_at, Some(tokens.len() - 1), "seed {seed}: {tokens:?}");
        } else {
            assert_eq!(eos_at, None, "seed {seed}: {tokens:?}");
            assert_eq!(tokens.len(), 120);
        }
    }
    assert!(stopped > 0, "no seed reached the end-of-text token");
}

#[test]
fn a_folder_without_a_model_is_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = generate(&["--model-dir", dir.path().to_str().unwrap(), "--tokens", "3"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.json"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn fine_tuning_a_model_folder_lowers_the_loss_and_saves_a_loadable_folder() {
    let dir = tempfile::tempdir().unwrap();
    // A small corpus the tiny model can fit quickly: one repeated sentence.
    let corpus = dir.path().join("corpus.txt");
    std::fs::write(&corpus, "the cat sat on the mat. ".repeat(3000)).unwrap();
    for name in ["gpt2-tiny", "llama-tiny"] {
        let out_dir = dir.path().join(format!("tuned-{name}"));
        let logs = dir.path().join(format!("logs-{name}"));
        let out = Command::new(env!("CARGO_BIN_EXE_train"))
            .args(["--init-from", fixture(name).to_str().unwrap()])
            .args(["--data", corpus.to_str().unwrap()])
            .args(["--save", out_dir.to_str().unwrap()])
            .args(["--log-dir", logs.to_str().unwrap()])
            .args([
                "--steps",
                "40",
                "--eval-interval",
                "20",
                "--eval-iters",
                "2",
            ])
            .args(["--batch-size", "8", "--block-size", "32", "--lr", "1e-2"])
            .args(["--warmup-steps", "5"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = summary(&out);
        let (before, after) = (
            s["initial_val_loss"].as_f64().unwrap(),
            s["final_val_loss"].as_f64().unwrap(),
        );
        assert!(after < before - 1.0, "{name}: val loss {before} -> {after}");
        assert_eq!(s["resumed_from_step"], serde_json::Value::Null);
        // The scalars of the run: the estimates at steps 0, 20 and 40, the loss every 10 steps.
        let log = std::fs::read_to_string(logs.join("metrics.jsonl")).unwrap();
        let lines: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let steps_with = |tag: &str| -> Vec<u64> {
            lines
                .iter()
                .filter(|v| v.get(tag).is_some())
                .map(|v| v["step"].as_u64().unwrap())
                .collect()
        };
        assert_eq!(steps_with("val/loss"), [0, 20, 40], "{name}: {log}");
        assert_eq!(steps_with("train/loss"), [10, 20, 30, 40], "{name}: {log}");
        let last_val = lines.iter().rev().find_map(|v| v["val/loss"].as_f64());
        assert_eq!(last_val, Some(after), "{name}: {log}");
        // The saved folder is a model `generate` loads, with the tokenizer copied.
        assert!(out_dir.join("tokenizer.json").is_file());
        let out = generate(&[
            "--model-dir",
            out_dir.to_str().unwrap(),
            "--prompt",
            "the cat",
            "--tokens",
            "8",
            "--temperature",
            "0",
        ]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(summary(&out)["model_type"], s["model_type"]);
    }
}

#[test]
fn fine_tuning_refuses_a_context_longer_than_the_model_and_a_missing_folder() {
    let out = Command::new(env!("CARGO_BIN_EXE_train"))
        .args(["--init-from", fixture("gpt2-tiny").to_str().unwrap()])
        .args(["--block-size", "4096", "--steps", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("block-size"), "{err}");
    // A folder that is not there is named.
    let out = Command::new(env!("CARGO_BIN_EXE_train"))
        .args(["--init-from", "no/such/folder", "--steps", "1", "--no-save"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no/such/folder"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
