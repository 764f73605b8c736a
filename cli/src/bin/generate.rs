//! `generate`: text from a GPT checkpoint folder written by `train --model gpt`, or from a
//! Hugging Face model folder (GPT-2, Llama: `--model-dir`), decoded with a key/value cache
//! (each new token attends over the cached context: O(context) per token). Prints the prompt
//! and the generated text as it comes, reports the first-token latency and the decoding rate
//! on stderr, and ends stdout with a JSON summary line (with the generated `token_ids` and
//! `text`).
//!
//! ```text
//! cargo run --release -p tessera-cli --bin generate -- --checkpoint checkpoints/gpt \
//!     --prompt "A bird in the hand" --tokens 300 --temperature 0.8 --top-k 20 --seed 1
//! cargo run --release -p tessera-cli --bin generate -- --model-dir path/to/gpt2 \
//!     --prompt "The meaning of life is" --tokens 64 --temperature 0
//! ```

use clap::Parser;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use tessera::registry::{self, BackendEntry, BackendJob, DeviceOptions};
use tessera_core::{Backend, DType, Error, Result};
use tessera_nn::generation::{generate_until, GenerationReport, SamplingConfig};
use tessera_nn::gpt::load_checkpoint;
use tessera_nn::precision::{CastCache, Precision};
use tessera_nn::pretrained::{PretrainedModel, PretrainedOptions};
use tessera_nn::Module;
use tessera_tokenizer::Tokenizer;

/// Generate text with a GPT trained by `train --model gpt`, or with a Hugging Face GPT-2 or
/// Llama model folder.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The checkpoint folder of `train --model gpt` (model.safetensors, vocab.json,
    /// config.json).
    #[arg(long, default_value = tessera_cli::gpt_job::DEFAULT_CHECKPOINT_DIR)]
    checkpoint: PathBuf,
    /// A Hugging Face model folder (config.json, model.safetensors or shards with their index,
    /// tokenizer.json) to generate with instead of `--checkpoint`.
    #[arg(long, conflicts_with = "checkpoint")]
    model_dir: Option<PathBuf>,
    /// The text to continue (for `--checkpoint`, every character must be in the model's
    /// vocabulary).
    #[arg(long, default_value = "\n")]
    prompt: String,
    /// Most tokens to generate (with `--model-dir`, generation stops earlier at the
    /// end-of-text token).
    #[arg(long, default_value_t = 200)]
    tokens: usize,
    /// Sampling temperature (0: always the most likely token, i.e. greedy).
    #[arg(long, default_value_t = 0.8)]
    temperature: f64,
    /// Sample among the k most likely tokens only.
    #[arg(long)]
    top_k: Option<usize>,
    /// Sample among the most likely tokens whose probabilities sum to p (nucleus sampling).
    #[arg(long)]
    top_p: Option<f64>,
    /// Seed of the sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// With `--model-dir`: do not stop at the end-of-text token.
    #[arg(long)]
    ignore_eos: bool,
    /// With `--model-dir`: compute precision (f32, bf16, f16).
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// With `--model-dir`: the dtype the weights are loaded in (f32, bf16, f16). By default
    /// the precision's: `--precision bf16` loads bf16 weights and computes in bf16 throughout,
    /// as `transformers` does with `dtype=torch.bfloat16` (1.3-1.6x f32's decoding speed on
    /// a CPU with AVX-512 BF16). `--dtype f32` keeps f32 weights and an f32 residual stream
    /// with 16-bit products, each weight rounded once (a `CastCache`) and kept beside its f32
    /// copy (1.5x the weights' memory).
    #[arg(long, value_parser = parse_weight_dtype)]
    dtype: Option<DType>,
    /// Compute backend (`tessera::registry`; `cuda` and `checked-cuda` in builds with
    /// `--features cuda`).
    #[arg(long, default_value = "cpu", value_parser = registry::value_parser())]
    backend: BackendEntry,
}

/// `--dtype`: a float dtype by its name.
fn parse_weight_dtype(word: &str) -> std::result::Result<DType, String> {
    match word {
        "f32" => Ok(DType::F32),
        "bf16" => Ok(DType::BF16),
        "f16" => Ok(DType::F16),
        other => Err(format!(
            "`{other}` is not a weight dtype (f32, bf16 or f16)"
        )),
    }
}

impl Args {
    /// The dtype of the loaded weights: `--dtype`, else the precision's compute dtype.
    fn weight_dtype(&self) -> DType {
        self.dtype
            .or(self.precision.compute_dtype())
            .unwrap_or(DType::F32)
    }

    fn sampling(&self) -> SamplingConfig {
        SamplingConfig::new()
            .temperature(self.temperature)
            .top_k(self.top_k)
            .top_p(self.top_p)
            .seed(self.seed)
    }
}

/// Prints the timing line on stderr and returns the JSON summary.
fn summarise(
    args: &Args,
    backend: &str,
    source: serde_json::Value,
    prompt_tokens: usize,
    report: &GenerationReport,
    text: String,
) -> serde_json::Value {
    eprintln!(
        "{} tokens: first after {:.1} ms (prompt of {prompt_tokens} encoded), then {:.1} tokens/s ({:.2} ms/token), {} context refill(s){}",
        report.tokens.len(),
        report.first_token_s * 1e3,
        report.tokens_per_s(),
        1e3 / report.tokens_per_s().max(1e-9),
        report.context_refills,
        if report.stopped { ", stopped at the end-of-text token" } else { "" },
    );
    let mut summary = serde_json::json!({
        "backend": backend,
        "prompt_tokens": prompt_tokens,
        "tokens": report.tokens.len(),
        "first_token_ms": report.first_token_s * 1e3,
        "tokens_per_s": report.tokens_per_s(),
        "seconds": report.seconds,
        "seed": args.seed,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "stopped_at_eos": report.stopped,
        "token_ids": report.tokens,
        "text": text,
    });
    if let (Some(s), serde_json::Value::Object(extra)) = (summary.as_object_mut(), source) {
        s.extend(extra);
    }
    summary
}

/// Generates from a `train --model gpt` checkpoint (a character vocabulary).
fn run_checkpoint<B: Backend>(args: &Args, backend: &B) -> Result<serde_json::Value> {
    let checkpoint = load_checkpoint(&args.checkpoint, backend)?;
    let tokenizer = &checkpoint.tokenizer;
    let prompt = tokenizer.encode(&args.prompt)?;
    let mut sampler = args.sampling().sampler()?;
    let mut out = std::io::stdout().lock();
    // Printing errors (a closed pipe) stop nothing: the summary still says what was done.
    let _ = write!(out, "{}", args.prompt);
    let _ = out.flush();
    let report = generate_until(
        &checkpoint.model,
        &prompt,
        args.tokens,
        &[],
        &mut sampler,
        &mut |token| {
            if let Ok(text) = tokenizer.decode(&[token]) {
                let _ = write!(out, "{text}");
                let _ = out.flush();
            }
        },
    )?;
    let _ = writeln!(out);
    let text = tokenizer.decode(&report.tokens)?;
    let source = serde_json::json!({ "checkpoint": args.checkpoint.display().to_string() });
    Ok(summarise(
        args,
        backend.name(),
        source,
        prompt.len(),
        &report,
        text,
    ))
}

/// Generates from a Hugging Face model folder with its own tokenizer.
fn run_model_dir<B: Backend>(args: &Args, dir: &PathBuf, backend: &B) -> Result<serde_json::Value> {
    let options = PretrainedOptions {
        dtype: args.weight_dtype(),
        precision: args.precision,
    };
    let model = PretrainedModel::from_pretrained(dir, backend, &options)?;
    let tokenizer = Tokenizer::from_folder(dir)?;
    let prompt: Vec<usize> = tokenizer
        .encode(&args.prompt, true)?
        .into_iter()
        .map(|id| id as usize)
        .collect();
    if prompt.is_empty() {
        return Err(Error::InvalidArgument {
            op: "generate",
            msg: "the prompt encodes to no token; pass a non-empty --prompt".into(),
        });
    }
    let eos = model
        .token_id("eos_token_id")
        .or(tokenizer.special_tokens().eos_id().map(|id| id as usize));
    let stop: Vec<usize> = match (args.ignore_eos, eos) {
        (false, Some(id)) => vec![id],
        _ => Vec::new(),
    };
    let mut sampler = args.sampling().sampler()?;
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "{}", args.prompt);
    let _ = out.flush();
    let mut stream = tokenizer.text_stream(true);
    let mut stream_error = None;
    // f32 weights with 16-bit products (`--dtype f32 --precision bf16`): each weight is
    // rounded to the compute dtype once, not on every token.
    let _casts = CastCache::enable();
    let report = generate_until(
        &model,
        &prompt,
        args.tokens,
        &stop,
        &mut sampler,
        &mut |token| match stream.push(token as u32) {
            Ok(Some(piece)) => {
                let _ = write!(out, "{piece}");
                let _ = out.flush();
            }
            Ok(None) => {}
            Err(e) => stream_error = Some(e),
        },
    )?;
    if let Some(e) = stream_error {
        return Err(e);
    }
    let _ = writeln!(out, "{}", stream.finish()?);
    let ids: Vec<u32> = report.tokens.iter().map(|&t| t as u32).collect();
    let text = tokenizer.decode(&ids, true)?;
    let source = serde_json::json!({
        "model_dir": dir.display().to_string(),
        "model_type": model.model_type(),
        "precision": args.precision.name(),
        // As loaded (the first parameter's), not as asked.
        "weight_dtype": model.parameters().first().map(|(_, p)| p.value().dtype().to_string()),
        "prompt_token_ids": prompt,
    });
    Ok(summarise(
        args,
        backend.name(),
        source,
        prompt.len(),
        &report,
        text,
    ))
}

/// The run on the device the registry opens.
struct Generate<'a>(&'a Args);

impl BackendJob for Generate<'_> {
    type Output = Result<serde_json::Value>;

    fn run<B: Backend>(self, dev: B) -> Self::Output {
        match &self.0.model_dir {
            Some(dir) => run_model_dir(self.0, dir, &dev),
            None => run_checkpoint(self.0, &dev),
        }
    }
}

fn main() -> ExitCode {
    tessera_cpu::tune_allocator();
    let args = Args::parse();
    let result = (args.backend)
        .open(&DeviceOptions::default(), Generate(&args))
        .and_then(|generated| generated);
    match result {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
