//! Hugging Face checkpoints (`fixtures/hf/`, made by `xtask/peers/make_hf_fixtures.py` with
//! `transformers`): logits, cached decoding, greedy generation and fine-tuning against the
//! references `transformers` computed, the save/load round trip, and typed errors on bad
//! folders.

use std::path::{Path, PathBuf};
use tessera_core::{DType, Error, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint::{self, NamedTensors};
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::pretrained::{PretrainedModel, PretrainedOptions};
use tessera_nn::Module;

pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/hf")
        .join(name)
}

fn load(name: &str) -> PretrainedModel<Cpu> {
    PretrainedModel::from_pretrained(fixture(name), &Cpu::new(), &PretrainedOptions::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn reference(name: &str) -> NamedTensors<Cpu> {
    checkpoint::load(fixture(name).join("reference.safetensors"), &Cpu::new())
        .unwrap()
        .tensors
}

/// Max |a - b| over max |b|: the relative error of a whole logits tensor (entries near zero
/// make an element-wise relative error meaningless).
fn relative_error(a: &Tensor<Cpu>, b: &Tensor<Cpu>) -> f64 {
    assert_eq!(a.dims(), b.dims());
    let (a, b) = (a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    let scale = b.iter().map(|y| y.abs()).fold(0.0, f64::max);
    diff / scale
}

const MODELS: [&str; 3] = ["gpt2-tiny", "llama-tiny", "llama3-tiny"];
const LENGTHS: [usize; 4] = [1, 5, 37, 100];

#[test]
fn logits_of_every_position_match_transformers() {
    for name in MODELS {
        let model = load(name);
        let r = reference(name);
        for len in LENGTHS {
            let ids = &r[&format!("input_ids_{len}")];
            let logits = model.forward(ids).unwrap().value();
            let err = relative_error(&logits, &r[&format!("logits_{len}")]);
            assert!(err < 1e-4, "{name}, {len} tokens: relative error {err:.2e}");
        }
        let logits = model.forward(&r["batch_input_ids"]).unwrap().value();
        let err = relative_error(&logits, &r["batch_logits"]);
        assert!(err < 1e-4, "{name}, a batch of 2: relative error {err:.2e}");
    }
}

#[test]
fn a_sharded_checkpoint_loads_the_same_model() {
    let (one, many) = (load("gpt2-tiny"), load("gpt2-tiny-sharded"));
    let (a, b) = (one.state_dict(), many.state_dict());
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, t) in &a {
        assert_eq!(
            t.to_vec_f64().unwrap(),
            b[name].to_vec_f64().unwrap(),
            "{name}"
        );
    }
}

/// The logits of `ids` (`[1, n]`) through a fresh cache: a prefill of `prefill` tokens, then
/// one token at a time.
fn cached_logits(model: &PretrainedModel<Cpu>, ids: &Tensor<Cpu>, prefill: usize) -> Tensor<Cpu> {
    let mut cache = model.new_cache(1).unwrap();
    let mut rows = vec![model
        .forward_cached(&ids.narrow(1, 0, prefill).unwrap(), &mut cache)
        .unwrap()];
    for t in prefill..ids.dims()[1] {
        rows.push(
            model
                .forward_cached(&ids.narrow(1, t, 1).unwrap(), &mut cache)
                .unwrap(),
        );
    }
    Tensor::cat(&rows.iter().collect::<Vec<_>>(), 1).unwrap()
}

#[test]
fn cached_decoding_matches_the_full_logits() {
    for name in MODELS {
        let model = load(name);
        let r = reference(name);
        let ids = &r["input_ids_37"];
        let expected = &r["logits_37"];
        let logits = cached_logits(&model, ids, 20);
        let err = relative_error(&logits, expected);
        assert!(err < 1e-4, "{name}: relative error {err:.2e}");
    }
}

/// Greedy decoding with the cache, `n` tokens after `prompt`.
fn greedy(model: &PretrainedModel<Cpu>, prompt: &Tensor<Cpu>, n: usize) -> Vec<i64> {
    let mut cache = model.new_cache(1).unwrap();
    let mut logits = model.forward_cached(prompt, &mut cache).unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let last = logits.narrow(1, logits.dims()[1] - 1, 1).unwrap();
        let next = last.argmax(-1, false).unwrap().to_vec::<i64>().unwrap()[0];
        out.push(next);
        let idx = Tensor::from_vec(vec![next], [1, 1], &Cpu::new()).unwrap();
        logits = model.forward_cached(&idx, &mut cache).unwrap();
    }
    out
}

#[test]
fn greedy_generation_is_token_for_token_that_of_transformers() {
    for name in MODELS {
        let model = load(name);
        let r = reference(name);
        let expected = r["greedy_new_tokens"].to_vec::<i64>().unwrap();
        let got = greedy(&model, &r["greedy_prompt"], expected.len());
        assert_eq!(got, expected, "{name}");
    }
}

/// Loads the folder `dir` that `model` (fixture `name`) was saved to and checks that it gives
/// the same logits, bit for bit.
fn assert_loads_back_identical(
    model: &PretrainedModel<Cpu>,
    dir: &Path,
    name: &str,
) -> PretrainedModel<Cpu> {
    let again =
        PretrainedModel::from_pretrained(dir, &Cpu::new(), &PretrainedOptions::default()).unwrap();
    let ids = &reference(name)["input_ids_37"];
    let (a, b) = (
        model.forward(ids).unwrap().value(),
        again.forward(ids).unwrap().value(),
    );
    assert_eq!(a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap(), "{name}");
    again
}

#[test]
fn a_saved_model_loads_back_with_the_same_logits() {
    for name in MODELS {
        let model = load(name);
        let dir = tempfile::tempdir().unwrap();
        model.save_pretrained(dir.path()).unwrap();
        let again = assert_loads_back_identical(&model, dir.path(), name);
        // The fields Tessera does not use survive.
        assert_eq!(
            again.hf_config().get("eos_token_id"),
            model.hf_config().get("eos_token_id")
        );
    }
}

#[test]
fn a_sharded_save_loads_back_and_replaces_the_single_file() {
    for name in MODELS {
        let model = load(name);
        let dir = tempfile::tempdir().unwrap();
        // First a single file, then shards of at most 30 kB over it, then a single file again.
        const LIMIT: u64 = 30_000;
        model.save_pretrained(dir.path()).unwrap();
        model.save_pretrained_sharded(dir.path(), LIMIT).unwrap();
        let files = |dir: &Path| {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".safetensors") || n.ends_with(".index.json"))
                .collect();
            names.sort();
            names
        };
        let sharded = files(dir.path());
        assert!(sharded.len() > 3, "{name}: {sharded:?}");
        assert!(
            !sharded.contains(&"model.safetensors".to_string()),
            "{name}"
        );
        let index: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.path().join("model.safetensors.index.json")).unwrap(),
        )
        .unwrap();
        let total: u64 = model
            .state_dict()
            .values()
            .map(|t| (t.numel() * t.dtype().size_in_bytes()) as u64)
            .sum();
        // GPT-2's head is the token embedding, stored once.
        let stored = index["metadata"]["total_size"].as_u64().unwrap();
        assert!(
            stored <= total && stored > total / 2,
            "{name}: {stored} of {total}"
        );
        let weight_map = index["weight_map"].as_object().unwrap();
        for shard in sharded.iter().filter(|n| n.starts_with("model-")) {
            let size = std::fs::metadata(dir.path().join(shard)).unwrap().len();
            let tensors = weight_map.values().filter(|f| *f == shard).count();
            // Within the limit (plus its header), or one tensor larger than the limit alone.
            assert!(
                size <= LIMIT + 4096 || tensors == 1,
                "{name}: {shard} has {size} bytes in {tensors} tensors"
            );
        }
        assert_loads_back_identical(&model, dir.path(), name);
        // Back to one file: the shards and the index go.
        model.save_pretrained(dir.path()).unwrap();
        assert_eq!(
            files(dir.path()),
            vec!["model.safetensors".to_string()],
            "{name}"
        );
        assert!(matches!(
            model.save_pretrained_sharded(dir.path(), 0),
            Err(Error::InvalidArgument { .. })
        ));
    }
}

#[test]
fn bf16_weights_load_into_f32_or_stay_bf16() {
    let dev = Cpu::new();
    let f32_model = load("llama3-tiny");
    let options = PretrainedOptions {
        dtype: DType::BF16,
        ..PretrainedOptions::default()
    };
    let bf16_model =
        PretrainedModel::from_pretrained(fixture("llama3-tiny"), &dev, &options).unwrap();
    for (name, t) in bf16_model.state_dict() {
        assert_eq!(t.dtype(), DType::BF16, "{name}");
        // bf16 -> f32 is exact, so the f32 model holds the stored values.
        assert_eq!(
            t.to_vec_f64().unwrap(),
            f32_model.state_dict()[&name].to_vec_f64().unwrap(),
            "{name}"
        );
    }
}

/// bf16 weights computing in bf16 (`generate --precision bf16`): the logits of a prompt, in
/// one pass and decoded one token at a time through the cache, stay as near `transformers`'
/// f32 logits as `transformers` itself in bf16 does (see [`BF16_LOGITS_TOLERANCE`]).
#[test]
fn bf16_weights_and_compute_are_as_near_f32_as_transformers_in_bf16() {
    let options = PretrainedOptions {
        dtype: DType::BF16,
        precision: tessera_nn::precision::Precision::BF16,
    };
    for name in MODELS {
        let model = PretrainedModel::from_pretrained(fixture(name), &Cpu::new(), &options)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let r = reference(name);
        let ids = &r["input_ids_37"];
        let expected = &r["logits_37"];
        let full = model.forward(ids).unwrap().value();
        assert_eq!(full.dtype(), DType::BF16, "{name}");
        let err = relative_error(&full, expected);
        assert!(
            err < BF16_LOGITS_TOLERANCE,
            "{name}, one pass: relative error {err:.2e}"
        );
        let cached = cached_logits(&model, ids, 20);
        let err = relative_error(&cached, expected);
        assert!(
            err < BF16_LOGITS_TOLERANCE,
            "{name}, cached: relative error {err:.2e}"
        );
    }
}

/// The bound of [`bf16_weights_and_compute_are_as_near_f32_as_transformers_in_bf16`]:
/// `transformers` loading these fixtures with `dtype=torch.bfloat16` is 1.8e-2 (GPT-2),
/// 2.1e-2 (Llama) and 2.4e-2 (Llama 3) from its f32 logits of `input_ids_37` (Tessera in bf16:
/// 1.9-2.2e-2); the bound allows twice that. A wrong product or cache entry is of order 1.
const BF16_LOGITS_TOLERANCE: f64 = 5e-2;

/// The fine-tuning reference: `finetune.json`'s batches of the fortunes corpus.
#[test]
fn twenty_fine_tuning_steps_end_at_the_loss_of_pytorch() {
    let Some(corpus_ids) = corpus_ids() else {
        return;
    };
    for name in ["gpt2-tiny", "llama-tiny"] {
        let text = std::fs::read_to_string(fixture(name).join("finetune.json")).unwrap();
        let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
        let get = |k: &str| reference[k].as_f64().unwrap();
        let (batch, context, stride) = (
            get("batch") as usize,
            get("context") as usize,
            get("stride") as usize,
        );
        let model = load(name);
        model.train();
        let config = AdamWConfig {
            lr: get("lr"),
            betas: (
                reference["betas"][0].as_f64().unwrap(),
                reference["betas"][1].as_f64().unwrap(),
            ),
            eps: get("eps"),
            weight_decay: get("weight_decay"),
            amsgrad: false,
        };
        let mut opt = AdamW::new(model.parameters(), config).unwrap();
        let windows = |step: usize| {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            for i in 0..batch {
                let off = ((step * batch + i) * stride) % (corpus_ids.len() - context - 1);
                x.extend(corpus_ids[off..off + context].iter().map(|&t| t as i64));
                y.extend(
                    corpus_ids[off + 1..off + context + 1]
                        .iter()
                        .map(|&t| t as i64),
                );
            }
            let dev = Cpu::new();
            (
                Tensor::from_vec(x, [batch, context], &dev).unwrap(),
                Tensor::from_vec(y, [batch, context], &dev).unwrap(),
            )
        };
        let losses = reference["losses"].as_array().unwrap();
        for (step, expected) in losses.iter().enumerate() {
            let (x, y) = windows(step);
            opt.zero_grad();
            let loss = model.loss(&x, &y).unwrap();
            let value = loss.value().to_vec_f64().unwrap()[0];
            let expected = expected.as_f64().unwrap();
            assert!(
                ((value - expected) / expected).abs() < 1e-4,
                "{name} step {step}: loss {value} vs PyTorch's {expected}"
            );
            loss.backward().unwrap();
            opt.step().unwrap();
        }
        let (x, y) = windows(0);
        let last = model.loss(&x, &y).unwrap().value().to_vec_f64().unwrap()[0];
        let expected = get("final_loss");
        assert!(
            ((last - expected) / expected).abs() < 1e-4,
            "{name} after 20 steps: loss {last} vs PyTorch's {expected}"
        );
    }
}

/// The fortunes corpus as the fixture tokenizer encodes it, or `None` (printed) when the
/// corpus is not installed.
fn corpus_ids() -> Option<Vec<u32>> {
    let corpus = match tessera_nn::data::TextCorpus::load(tessera_nn::data::FORTUNES_DIR) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipped: the fine-tuning reference needs Debian's fortunes: {e}");
            return None;
        }
    };
    let tokenizer =
        tessera_tokenizer::Tokenizer::from_file(fixture("tokenizer/tokenizer.json")).unwrap();
    Some(tokenizer.encode(&corpus.text, false).unwrap())
}

/// A copy of a fixture folder that a test may break.
pub(crate) fn scratch_copy(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

fn load_err(dir: &Path) -> Error {
    match PretrainedModel::from_pretrained(dir, &Cpu::new(), &PretrainedOptions::default()) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e,
    }
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let path = dir.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(config.as_object_mut().unwrap());
    std::fs::write(&path, config.to_string()).unwrap();
}

#[test]
fn unsupported_configurations_are_errors_naming_the_field() {
    let cases: [(&str, &str, serde_json::Value, &str); 6] = [
        ("gpt2-tiny", "model_type", "bert".into(), "model_type"),
        (
            "gpt2-tiny",
            "activation_function",
            "relu".into(),
            "activation_function",
        ),
        ("gpt2-tiny", "n_inner", 100.into(), "n_inner"),
        (
            "gpt2-tiny",
            "scale_attn_by_inverse_layer_idx",
            true.into(),
            "scale_attn_by_inverse_layer_idx",
        ),
        ("llama-tiny", "hidden_act", "gelu".into(), "hidden_act"),
        (
            "llama-tiny",
            "num_key_value_heads",
            3.into(),
            "num_key_value_heads",
        ),
    ];
    for (name, key, value, expected) in cases {
        let dir = scratch_copy(name);
        edit_config(dir.path(), |c| {
            c.insert(key.into(), value.clone());
        });
        let err = load_err(dir.path());
        assert!(matches!(err, Error::Format { .. }), "{key}: {err:?}");
        assert!(err.to_string().contains(expected), "{key}: {err}");
    }
    let dir = scratch_copy("llama3-tiny");
    edit_config(dir.path(), |c| {
        c["rope_parameters"]["rope_type"] = "yarn".into();
    });
    let err = load_err(dir.path()).to_string();
    assert!(err.contains("yarn"), "{err}");
}

#[test]
fn missing_extra_and_mis_shaped_tensors_are_errors_naming_them() {
    let dev = Cpu::new();
    let dir = scratch_copy("llama-tiny");
    let weights = dir.path().join("model.safetensors");
    let original = checkpoint::load(&weights, &dev).unwrap();
    let save = |tensors: &NamedTensors<Cpu>| {
        let meta = Default::default();
        checkpoint::save(&weights, tensors.iter(), &meta).unwrap();
    };
    let mut missing = original.tensors.clone();
    missing.remove("model.layers.1.mlp.up_proj.weight");
    save(&missing);
    let err = load_err(dir.path());
    assert!(matches!(err, Error::Checkpoint { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("model.layers.1.mlp.up_proj.weight"),
        "{err}"
    );

    let mut extra = original.tensors.clone();
    extra.insert(
        "model.layers.9.surprise".into(),
        Tensor::zeros([2], DType::F32, &dev).unwrap(),
    );
    save(&extra);
    let err = load_err(dir.path()).to_string();
    assert!(err.contains("model.layers.9.surprise"), "{err}");

    let mut wrong = original.tensors.clone();
    wrong.insert(
        "model.norm.weight".into(),
        Tensor::zeros([31], DType::F32, &dev).unwrap(),
    );
    save(&wrong);
    let err = load_err(dir.path()).to_string();
    assert!(err.contains("model.norm.weight"), "{err}");
}

#[test]
fn broken_folders_are_typed_errors() {
    // No weights at all.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("gpt2-tiny/config.json"),
        dir.path().join("config.json"),
    )
    .unwrap();
    assert!(matches!(load_err(dir.path()), Error::MissingData { .. }));
    // No configuration.
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(load_err(dir.path()), Error::Io { .. }));
    // A configuration that is not JSON.
    let dir = scratch_copy("gpt2-tiny");
    std::fs::write(dir.path().join("config.json"), "{ not json").unwrap();
    assert!(matches!(load_err(dir.path()), Error::Format { .. }));
    // An index naming a shard that is not there, or one outside the folder.
    for shard in ["model-00009-of-00009.safetensors", "../model.safetensors"] {
        let dir = scratch_copy("gpt2-tiny-sharded");
        let path = dir.path().join("model.safetensors.index.json");
        let mut index: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        index["weight_map"]["transformer.wpe.weight"] = shard.into();
        std::fs::write(&path, index.to_string()).unwrap();
        let err = load_err(dir.path());
        assert!(
            matches!(err, Error::MissingData { .. } | Error::Format { .. }),
            "{shard}: {err:?}"
        );
        assert!(err.to_string().contains(shard), "{err}");
    }
    // A truncated weights file.
    let dir = scratch_copy("gpt2-tiny");
    let weights = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    assert!(matches!(load_err(dir.path()), Error::Format { .. }));
}

/// Whether `transformers` and `torch` import (they are not installed in CI: 4 GB).
fn transformers_available() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import transformers, torch"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn saved_folders_load_in_transformers() {
    if !transformers_available() {
        eprintln!("skipped: python3 cannot import transformers and torch (pip install torch transformers)");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../xtask/peers/check_hf_load.py");
    for name in MODELS {
        let model = load(name);
        // Move the weights off the fixture's so that a loader reading the wrong file fails.
        for (_, p) in model.parameters() {
            let bumped = p.value().add_scalar(0.01).unwrap();
            p.set_value(bumped).unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        // Sharded, so that transformers reads Tessera's index too.
        model.save_pretrained_sharded(dir.path(), 40_000).unwrap();
        assert!(dir.path().join("model.safetensors.index.json").is_file());
        let ids = reference(name)["batch_input_ids"].clone();
        let logits = model.forward(&ids).unwrap().value();
        let tensors = [("input_ids", &ids), ("logits", &logits)];
        checkpoint::save(
            dir.path().join("tessera_logits.safetensors"),
            tensors,
            &Default::default(),
        )
        .unwrap();
        let out = std::process::Command::new("python3")
            .arg(&script)
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `llama-tiny` (128 positions) with its `rope_parameters` turned into `kind` scaling by 2.
fn llama_scaled(kind: &str) -> (tempfile::TempDir, PretrainedModel<Cpu>) {
    let dir = scratch_copy("llama-tiny");
    edit_config(dir.path(), |c| {
        c["rope_parameters"]["rope_type"] = kind.into();
        c["rope_parameters"]["factor"] = 2.0.into();
    });
    let model =
        PretrainedModel::from_pretrained(dir.path(), &Cpu::new(), &PretrainedOptions::default())
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
    (dir, model)
}

fn logits(model: &PretrainedModel<Cpu>, ids: &Tensor<Cpu>) -> Vec<f64> {
    model.forward(ids).unwrap().value().to_vec_f64().unwrap()
}

/// The `config.json` a model saves.
fn saved_config(model: &PretrainedModel<Cpu>) -> serde_json::Value {
    let out = tempfile::tempdir().unwrap();
    model.save_pretrained(out.path()).unwrap();
    serde_json::from_str(&std::fs::read_to_string(out.path().join("config.json")).unwrap()).unwrap()
}

#[test]
fn dynamic_rope_scaling_is_the_plain_model_inside_the_original_context_and_runs_past_it() {
    let r = reference("llama-tiny");
    let plain = load("llama-tiny");
    let (_dir, dynamic) = llama_scaled("dynamic");
    assert_eq!((plain.max_positions(), dynamic.max_positions()), (128, 256));
    // Up to 128 positions the frequencies are the plain ones: the same logits, bit for bit
    // (and so `transformers`' references for the plain model).
    let ids = &r["input_ids_100"];
    assert_eq!(logits(&dynamic, ids), logits(&plain, ids));
    // 200 positions: the plain model refuses them; the dynamic one rotates the whole sequence
    // with a stretched base, so even the early positions' logits change (all but position 0,
    // which turns by no angle and attends to itself alone).
    let long: Vec<i64> = (0..200).map(|i| (i * 7 % 50) as i64).collect();
    let long = Tensor::from_vec(long, [1, 200], &Cpu::new()).unwrap();
    assert!(plain.forward(&long).is_err());
    let stretched = logits(&dynamic, &long);
    assert!(stretched.iter().all(|v| v.is_finite()));
    let head = logits(&dynamic, &long.narrow(1, 0, 100).unwrap());
    let vocab = head.len() / 100;
    assert!(stretched[..vocab] == head[..vocab]);
    assert!(stretched[vocab..100 * vocab] != head[vocab..]);
    // Saved as `transformers` reads it: the original context and the factor.
    let saved = saved_config(&dynamic);
    assert_eq!(saved["max_position_embeddings"], 128);
    assert_eq!(saved["rope_scaling"]["rope_type"], "dynamic");
    assert_eq!(saved["rope_scaling"]["factor"], 2.0);
}

#[test]
fn linear_rope_scaling_changes_the_logits_and_saves_back() {
    let r = reference("llama-tiny");
    let ids = &r["input_ids_37"];
    let (_dir, linear) = llama_scaled("linear");
    assert_eq!(linear.max_positions(), 128);
    let (a, b) = (logits(&linear, ids), logits(&load("llama-tiny"), ids));
    // Position 0 turns by no angle in either model; later ones turn by half the angle.
    let vocab = a.len() / 37;
    assert!(a[..vocab] == b[..vocab]);
    assert!(a[vocab..] != b[vocab..]);
    let saved = saved_config(&linear);
    assert_eq!(saved["rope_scaling"]["rope_type"], "linear");
    assert_eq!(saved["rope_scaling"]["factor"], 2.0);
    // And the saved folder loads back to the same logits.
    let out = tempfile::tempdir().unwrap();
    linear.save_pretrained(out.path()).unwrap();
    let back =
        PretrainedModel::from_pretrained(out.path(), &Cpu::new(), &PretrainedOptions::default())
            .unwrap();
    assert_eq!(logits(&back, ids), a);
}
