//! `generate`: text from a GPT checkpoint folder written by `train --model gpt`, decoded with a
//! key/value cache (each new token attends over the cached context: O(context) per token).
//! Prints the prompt and the generated text as it comes, reports the first-token latency and
//! the decoding rate on stderr, and ends stdout with a JSON summary line.
//!
//! ```text
//! cargo run --release -p tessera-cli --bin generate -- --checkpoint checkpoints/gpt \
//!     --prompt "A bird in the hand" --tokens 300 --temperature 0.8 --top-k 20 --seed 1
//! ```

use clap::Parser;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use tessera::registry::{self, BackendEntry, BackendJob, DeviceOptions};
use tessera_core::{Backend, Result};
use tessera_nn::gpt::{generate, load_checkpoint, SamplingConfig};

/// Generate text with a GPT trained by `train --model gpt`.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The checkpoint folder (model.safetensors, vocab.json, config.json).
    #[arg(long, default_value = tessera_cli::gpt_job::DEFAULT_CHECKPOINT_DIR)]
    checkpoint: PathBuf,
    /// The text to continue (every character must be in the model's vocabulary).
    #[arg(long, default_value = "\n")]
    prompt: String,
    /// Tokens (characters) to generate.
    #[arg(long, default_value_t = 200)]
    tokens: usize,
    /// Sampling temperature (0: always the most likely character).
    #[arg(long, default_value_t = 0.8)]
    temperature: f64,
    /// Sample among the k most likely characters only.
    #[arg(long)]
    top_k: Option<usize>,
    /// Seed of the sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Compute backend (`tessera::registry`; `cuda` and `checked-cuda` in builds with
    /// `--features cuda`).
    #[arg(long, default_value = "cpu", value_parser = registry::value_parser())]
    backend: BackendEntry,
}

/// Loads the checkpoint onto `backend`, generates and prints; returns the JSON summary.
fn run<B: Backend>(args: &Args, backend: &B) -> Result<serde_json::Value> {
    let checkpoint = load_checkpoint(&args.checkpoint, backend)?;
    let tokenizer = &checkpoint.tokenizer;
    let prompt = tokenizer.encode(&args.prompt)?;
    let mut sampler = SamplingConfig::new()
        .temperature(args.temperature)
        .top_k(args.top_k)
        .seed(args.seed)
        .sampler()?;
    let mut out = std::io::stdout().lock();
    // Printing errors (a closed pipe) stop nothing: the summary still says what was done.
    let _ = write!(out, "{}", args.prompt);
    let _ = out.flush();
    let report = generate(
        &checkpoint.model,
        &prompt,
        args.tokens,
        &mut sampler,
        &mut |token| {
            if let Ok(text) = tokenizer.decode(&[token]) {
                let _ = write!(out, "{text}");
                let _ = out.flush();
            }
        },
    )?;
    let _ = writeln!(out);
    eprintln!(
        "{} tokens: first after {:.1} ms (prompt of {} encoded), then {:.1} tokens/s ({:.2} ms/token), {} context refill(s)",
        report.tokens.len(),
        report.first_token_s * 1e3,
        prompt.len(),
        report.tokens_per_s(),
        1e3 / report.tokens_per_s().max(1e-9),
        report.context_refills,
    );
    Ok(serde_json::json!({
        "checkpoint": args.checkpoint.display().to_string(),
        "backend": backend.name(),
        "prompt_tokens": prompt.len(),
        "tokens": report.tokens.len(),
        "first_token_ms": report.first_token_s * 1e3,
        "tokens_per_s": report.tokens_per_s(),
        "seconds": report.seconds,
        "seed": args.seed,
        "temperature": args.temperature,
        "top_k": args.top_k,
    }))
}

/// [`run`] on the device the registry opens.
struct Generate<'a>(&'a Args);

impl BackendJob for Generate<'_> {
    type Output = Result<serde_json::Value>;

    fn run<B: Backend>(self, dev: B) -> Self::Output {
        run(self.0, &dev)
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
