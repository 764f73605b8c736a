//! The `decode` suite: a pretrained-shaped causal language model at batch 1, as `generate
//! --model-dir` runs it: the prefill of a prompt (tokens/s) and greedy KV-cached decoding of new
//! tokens after it (tokens/s), and the resident memory of one prefill + decode, for the GPT-2
//! 124M shape and a Llama shape (12 layers, width 768, 12 query / 4 key-value heads, SwiGLU
//! 2048, untied head, about 125M parameters).
//!
//! Tessera's side initialises each model at random (seed 0), writes it as a Hugging Face folder
//! under `--dir` and loads it back through `tessera_nn::pretrained`; the PyTorch peer
//! (`xtask/peers/decode_torch.py`) loads the same folder with `transformers`, so both sides run
//! the same weights on the same prompt. A decode repetition rewinds the cache to the prompt
//! (`truncate` here, `DynamicCache.crop` there) and decodes `--new` tokens one at a time,
//! reading each argmax on the host.
//!
//! `--precision bf16` runs both sides in bf16, weights included: Tessera loads the folder with
//! `PretrainedOptions { dtype: BF16, precision: BF16 }` (what `generate --precision bf16`
//! does), `transformers` with `dtype=torch.bfloat16`. Both round the same f32 weights to the
//! nearest bf16.

use std::path::PathBuf;

use clap::Args;
use tessera_core::{Backend, DType, Generator, Tensor};
use tessera_nn::generation::CausalLm;
use tessera_nn::gpt::GptConfig;
use tessera_nn::layers::GeluApproximation;
use tessera_nn::llama::LlamaConfig;
use tessera_nn::precision::Precision;
use tessera_nn::pretrained::{PretrainedModel, PretrainedOptions};

use crate::bench::precision::PeerPrecision;
use crate::bench::record::{MemoryUse, Record};
use crate::bench::resident;
use crate::bench::timing::{Protocol, Timing};
use crate::process::workspace_root;
use crate::TaskResult;

/// The suite's name.
pub const NAME: &str = "decode";

/// Where the model folders go when `--dir` is not given (relative to the workspace root).
pub const DEFAULT_DIR: &str = "target/bench/decode";

/// Arguments of the `decode` suite (the peer takes the same words).
#[derive(Debug, Clone, PartialEq, Args)]
pub struct DecodeArgs {
    /// The model shapes, comma-separated: gpt2 (GPT-2 124M), llama (the Llama shape).
    #[arg(long, value_delimiter = ',', default_value = "gpt2,llama")]
    pub shapes: Vec<String>,
    /// Prompt tokens (the prefill).
    #[arg(long, default_value_t = 128)]
    pub prefill: usize,
    /// Tokens decoded after the prompt.
    #[arg(long, default_value_t = 128)]
    pub new: usize,
    /// Layers of both shapes.
    #[arg(long, default_value_t = 12)]
    pub layers: usize,
    /// Model width of both shapes.
    #[arg(long, default_value_t = 768)]
    pub width: usize,
    /// Query heads (the Llama shape has a third as many key/value heads).
    #[arg(long, default_value_t = 12)]
    pub heads: usize,
    /// The vocabulary [default: 50257 for gpt2, 32000 for llama].
    #[arg(long)]
    pub vocab: Option<usize>,
    /// Timed repetitions of each case [default: enough for about 1.5 s, at least 5].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub reps: Option<u64>,
    /// The folder of the model folders [default: target/bench/decode].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The precision of both sides, weights included: f32, or bf16 (Tessera's bf16 weights
    /// and policy, `transformers`' `dtype=torch.bfloat16`) [default: tessera-bench's
    /// --precision].
    #[arg(long, value_enum)]
    pub precision: Option<PeerPrecision>,
}

impl DecodeArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        let mut args = vec![
            "--shapes".to_string(),
            self.shapes.join(","),
            "--prefill".to_string(),
            self.prefill.to_string(),
            "--new".to_string(),
            self.new.to_string(),
            "--layers".to_string(),
            self.layers.to_string(),
            "--width".to_string(),
            self.width.to_string(),
            "--heads".to_string(),
            self.heads.to_string(),
        ];
        if let Some(vocab) = self.vocab {
            args.extend(["--vocab".to_string(), vocab.to_string()]);
        }
        if let Some(reps) = self.reps {
            args.extend(["--reps".to_string(), reps.to_string()]);
        }
        if let Some(dir) = &self.dir {
            args.extend(["--dir".to_string(), dir.display().to_string()]);
        }
        if let Some(precision) = self.precision {
            args.extend(["--precision".to_string(), precision.word().to_string()]);
        }
        args
    }

    /// The folder of shape `shape`'s model.
    pub fn model_dir(&self, shape: &str) -> PathBuf {
        let dir = self.dir.clone().unwrap_or_else(|| DEFAULT_DIR.into());
        let dir = if dir.is_absolute() {
            dir
        } else {
            workspace_root().join(dir)
        };
        dir.join(shape)
    }

    /// Positions the models know: the prompt and the new tokens, at least GPT-2's 1024.
    fn positions(&self) -> usize {
        (self.prefill + self.new).max(1024)
    }

    /// Writes shape `shape`'s model (random, seed 0) as a Hugging Face folder.
    fn write_model<B: Backend>(&self, dev: &B, shape: &str) -> TaskResult<PathBuf> {
        let dir = self.model_dir(shape);
        let mut g = Generator::new(0);
        match shape {
            "gpt2" => GptConfig::new(
                self.layers,
                self.heads,
                self.width,
                self.positions(),
                self.vocab.unwrap_or(50257),
            )
            .gelu(GeluApproximation::Tanh)
            .init(dev, &mut g)?
            .save_pretrained(&dir, None)?,
            "llama" => LlamaConfig::new(
                self.vocab.unwrap_or(32000),
                self.width,
                self.width * 8 / 3,
                self.layers,
                self.heads,
                (self.heads / 3).max(1),
                self.positions(),
            )
            .rms_norm_eps(1e-5)
            .init(dev, &mut g)?
            .save_pretrained(&dir, None)?,
            other => return Err(format!("unknown shape `{other}` (gpt2 or llama)").into()),
        }
        Ok(dir)
    }

    /// The prompt: deterministic ids spread over the vocabulary.
    fn prompt(&self, vocab: usize) -> Vec<i64> {
        (0..self.prefill)
            .map(|i| ((i * 7919 + 13) % vocab) as i64)
            .collect()
    }
}

/// The id of the largest of the last position's logits `[1, n, vocab]`.
fn last_argmax<B: Backend>(logits: &Tensor<B>) -> tessera_core::Result<i64> {
    let n = logits.dims()[1];
    Ok(logits
        .narrow(1, n - 1, 1)?
        .argmax(-1, false)?
        .to_vec::<i64>()?[0])
}

/// Measures every shape on `dev`: a `prefill`, a `decode` and a `decode-memory` record each
/// (`n` is tokens, so `samples_per_s` is tokens/s). Under a 16-bit `precision` (the suite's
/// `--precision`, else this argument) the weights are loaded in that dtype too.
pub fn measure<B: Backend>(
    dev: &B,
    args: &DecodeArgs,
    precision: Precision,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> TaskResult<()> {
    if args.prefill == 0 || args.new == 0 {
        return Err("--prefill and --new must be at least 1".into());
    }
    let precision = args
        .precision
        .map_or(precision, PeerPrecision::model_precision);
    // Records say their precision when the suite's own flag chose it (tessera-bench labels
    // the others with its global one).
    let label = args.precision.map(|p| p.word().to_string());
    let mut emit = |mut record: Record| {
        if record.precision.is_none() {
            record.precision.clone_from(&label);
        }
        emit(record)
    };
    for shape in &args.shapes {
        let dir = args.write_model(dev, shape)?;
        let options = PretrainedOptions {
            dtype: precision.compute_dtype().unwrap_or(DType::F32),
            precision,
        };
        let model = PretrainedModel::from_pretrained(&dir, dev, &options)?;
        let prompt = Tensor::from_vec(args.prompt(model.vocab_size()), [1, args.prefill], dev)?;
        let mut cache = CausalLm::new_cache(&model)?;
        let reps = args.reps.map(|r| r as usize);
        let record = |phase: &str, n: usize, timing: &Timing| {
            Record::new(NAME, "tessera", dev.name(), n, timing)
                .with_samples()
                .with_model(shape)
                .with_phase(phase)
        };

        let timing = protocol.measure(reps, || {
            cache.clear();
            last_argmax(&model.forward_cached(&prompt, &mut cache)?)
        })?;
        emit(record("prefill", args.prefill, &timing));

        // The cache holds the prompt now; each repetition rewinds to it.
        cache.clear();
        let first = last_argmax(&model.forward_cached(&prompt, &mut cache)?)?;
        let decode = |cache: &mut tessera_nn::pretrained::PretrainedCache<B>| {
            cache.truncate(args.prefill);
            let mut token = first;
            for _ in 0..args.new {
                let idx = Tensor::from_vec(vec![token], [1, 1], dev)?;
                token = last_argmax(&model.forward_cached(&idx, cache)?)?;
            }
            Ok::<_, tessera_core::Error>(token)
        };
        let timing = protocol.measure(reps, || decode(&mut cache))?;
        emit(record("decode", args.new, &timing));

        // Memory: the model is resident; one prefill and decode in a fresh cache.
        drop(cache);
        let before = resident::read().ok_or("could not read /proc/self/status")?;
        resident::reset_peak();
        let start = std::time::Instant::now();
        let mut fresh = CausalLm::new_cache(&model)?;
        last_argmax(&model.forward_cached(&prompt, &mut fresh)?)?;
        decode(&mut fresh)?;
        let seconds = start.elapsed().as_secs_f64();
        let after = resident::read().ok_or("could not read /proc/self/status")?;
        drop(fresh);
        let mut r = record(
            "decode-memory",
            args.prefill + args.new,
            &Timing::from_samples(&[seconds]).expect("one sample"),
        );
        r.memory = Some(MemoryUse {
            rss_before_bytes: before.current,
            peak_rss_bytes: after.peak,
            rss_after_bytes: after.current,
        });
        emit(r);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        decode: DecodeArgs,
    }

    #[test]
    fn tiny_models_of_both_shapes_are_measured_and_written() {
        let dir = std::env::temp_dir().join(format!("tessera-decode-bench-{}", std::process::id()));
        let words = [
            "decode",
            "--shapes",
            "gpt2,llama",
            "--prefill",
            "4",
            "--new",
            "3",
            "--layers",
            "1",
            "--width",
            "24",
            "--heads",
            "3",
            "--vocab",
            "50",
            "--reps",
            "1",
            "--dir",
        ];
        let mut argv: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        argv.push(dir.display().to_string());
        let args = Cli::try_parse_from(&argv).unwrap().decode;
        assert_eq!(args.to_cli_args(), argv[1..]);
        let quick = Protocol::quick();
        let mut records = Vec::new();
        measure(
            &tessera_cpu::Cpu::new(),
            &args,
            Precision::F32,
            &quick,
            &mut |r| records.push(r),
        )
        .unwrap();
        let cases: Vec<(&str, &str, usize)> = records
            .iter()
            .map(|r| {
                (
                    r.model.as_deref().unwrap(),
                    r.phase.as_deref().unwrap(),
                    r.n,
                )
            })
            .collect();
        assert_eq!(
            cases,
            [
                ("gpt2", "prefill", 4),
                ("gpt2", "decode", 3),
                ("gpt2", "decode-memory", 7),
                ("llama", "prefill", 4),
                ("llama", "decode", 3),
                ("llama", "decode-memory", 7),
            ]
        );
        assert!(records[2].memory.is_some());
        for shape in ["gpt2", "llama"] {
            assert!(dir.join(shape).join("config.json").is_file());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_bf16_variant_is_labelled_and_forwarded_to_the_peer() {
        let dir =
            std::env::temp_dir().join(format!("tessera-decode-bench-bf16-{}", std::process::id()));
        let mut argv: Vec<String> = [
            "decode",
            "--shapes",
            "llama",
            "--prefill",
            "3",
            "--new",
            "2",
            "--layers",
            "1",
            "--width",
            "24",
            "--heads",
            "3",
            "--vocab",
            "40",
            "--reps",
            "1",
            "--dir",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        argv.push(dir.display().to_string());
        argv.extend(["--precision".to_string(), "bf16".to_string()]);
        let args = Cli::try_parse_from(&argv).unwrap().decode;
        assert_eq!(args.precision, Some(PeerPrecision::Bf16));
        assert_eq!(args.to_cli_args(), argv[1..]);
        let quick = Protocol::quick();
        let mut records = Vec::new();
        // The suite's own flag wins over tessera-bench's precision.
        measure(
            &tessera_cpu::Cpu::new(),
            &args,
            Precision::F32,
            &quick,
            &mut |r| records.push(r),
        )
        .unwrap();
        assert_eq!(records.len(), 3);
        for r in &records {
            assert_eq!(r.precision.as_deref(), Some("bf16"), "{:?}", r.phase);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
