//! Autoregressive generation with a [`GptCache`] (each new token attends over the cached keys:
//! O(context) per token instead of a full re-run), and the full re-computation it must equal.
//!
//! **Context.** A model knows `max_positions` positions (a GPT's `block_size`). When the context would grow past them, it
//! is cut to its last `block_size / 2` tokens and re-encoded in one batched pass (the cache is
//! refilled), so the cost of that pass is spread over the next `block_size / 2` tokens. Both
//! functions here follow this rule, so they produce the same tokens.

use super::{CausalLm, Sampler};
use std::time::Instant;
use tessera_core::{Backend, Error, Result, Tensor};

/// Which tokens of a growing sequence form the context.
#[derive(Clone, Copy, Debug)]
struct ContextWindow {
    block_size: usize,
    start: usize,
}

impl ContextWindow {
    /// The window for `len` tokens; true when it moved (the cache must be refilled).
    fn update(&mut self, len: usize) -> bool {
        if len - self.start <= self.block_size {
            return false;
        }
        let keep = (self.block_size / 2).max(1);
        self.start = len - keep;
        true
    }
}

/// What a generation run did and how long it took.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerationReport {
    /// The generated tokens (the prompt excluded).
    pub tokens: Vec<usize>,
    /// Seconds from the start to the first generated token (encoding the prompt included).
    pub first_token_s: f64,
    /// Seconds for everything.
    pub seconds: f64,
    /// Times the context was cut and re-encoded.
    pub context_refills: usize,
    /// Whether generation ended at a stop token (the last of `tokens`) rather than at the
    /// token budget.
    pub stopped: bool,
}

impl GenerationReport {
    /// Tokens per second after the first one (the steady decoding rate).
    pub fn tokens_per_s(&self) -> f64 {
        let rest = self.seconds - self.first_token_s;
        if self.tokens.len() < 2 || rest <= 0.0 {
            return 0.0;
        }
        (self.tokens.len() - 1) as f64 / rest
    }
}

/// The last row of logits `[1, n, vocab]` on the host.
fn last_logits<B: Backend>(logits: &Tensor<B>) -> Result<Vec<f64>> {
    let n = logits.dims()[1];
    logits.narrow(1, n - 1, 1)?.to_vec_f64()
}

fn tokens_tensor<B: Backend>(tokens: &[usize], backend: &B) -> Result<Tensor<B>> {
    let ids: Vec<i64> = tokens.iter().map(|&t| t as i64).collect();
    Tensor::from_vec(ids, [1, tokens.len()], backend)
}

fn check_prompt(prompt: &[usize], vocab: usize) -> Result<()> {
    if prompt.is_empty() {
        return Err(Error::InvalidArgument {
            op: "generate",
            msg: "the prompt needs at least one token".into(),
        });
    }
    if let Some(&bad) = prompt.iter().find(|&&t| t >= vocab) {
        return Err(Error::InvalidArgument {
            op: "generate",
            msg: format!("prompt token {bad} is outside the vocabulary of {vocab}"),
        });
    }
    Ok(())
}

/// Generates `max_new` tokens after `prompt` (batch 1) with a key/value cache, drawing each
/// with `sampler` and passing it to `on_token` as soon as it is known.
pub fn generate<B: Backend, M: CausalLm<B>>(
    model: &M,
    prompt: &[usize],
    max_new: usize,
    sampler: &mut Sampler,
    on_token: &mut dyn FnMut(usize),
) -> Result<GenerationReport> {
    generate_until(model, prompt, max_new, &[], sampler, on_token)
}

/// [`generate`] that also stops after any token of `stop` (an end-of-text token), which is
/// kept as the last generated token (as `transformers`' `generate` keeps it).
pub fn generate_until<B: Backend, M: CausalLm<B>>(
    model: &M,
    prompt: &[usize],
    max_new: usize,
    stop: &[usize],
    sampler: &mut Sampler,
    on_token: &mut dyn FnMut(usize),
) -> Result<GenerationReport> {
    check_prompt(prompt, model.vocab_size())?;
    let backend = model.backend();
    let start = Instant::now();
    let mut cache = model.new_cache()?;
    let mut tokens = prompt.to_vec();
    let mut window = ContextWindow {
        block_size: model.max_positions(),
        start: 0,
    };
    window.update(tokens.len());
    let mut logits = model.forward_cached(
        &tokens_tensor(&tokens[window.start..], &backend)?,
        &mut cache,
    )?;
    let mut report = GenerationReport {
        // Grows with what is generated: `max_new` is a bound the caller picks, often "until
        // the end-of-text token", and may be far larger than what is ever generated.
        tokens: Vec::new(),
        first_token_s: 0.0,
        seconds: 0.0,
        context_refills: 0,
        stopped: false,
    };
    for i in 0..max_new {
        let next = sampler.sample(&last_logits(&logits)?);
        if i == 0 {
            report.first_token_s = start.elapsed().as_secs_f64();
        }
        on_token(next);
        tokens.push(next);
        report.tokens.push(next);
        if stop.contains(&next) {
            report.stopped = true;
            break;
        }
        if i + 1 == max_new {
            break;
        }
        logits = if window.update(tokens.len()) {
            report.context_refills += 1;
            model.clear_cache(&mut cache);
            model.forward_cached(
                &tokens_tensor(&tokens[window.start..], &backend)?,
                &mut cache,
            )?
        } else {
            model.forward_cached(&tokens_tensor(&[next], &backend)?, &mut cache)?
        };
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// [`generate`] without a cache: every token re-runs the model over the whole context (the
/// same context rule). The reference the cached path is tested against.
pub fn generate_without_cache<B: Backend, M: CausalLm<B>>(
    model: &M,
    prompt: &[usize],
    max_new: usize,
    sampler: &mut Sampler,
) -> Result<Vec<usize>> {
    check_prompt(prompt, model.vocab_size())?;
    let backend = model.backend();
    let mut tokens = prompt.to_vec();
    let mut window = ContextWindow {
        block_size: model.max_positions(),
        start: 0,
    };
    let mut generated = Vec::new();
    for _ in 0..max_new {
        window.update(tokens.len());
        let idx = tokens_tensor(&tokens[window.start..], &backend)?;
        let logits = model.forward_uncached(&idx)?;
        let next = sampler.sample(&last_logits(&logits)?);
        tokens.push(next);
        generated.push(next);
    }
    Ok(generated)
}
