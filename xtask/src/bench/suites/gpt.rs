//! The `gpt` suite: a GPT's training step (tokens/s) and its generation at batch 1 with a
//! key/value cache (tokens/s, i.e. ms/token), for one fixed configuration (default 4 layers,
//! 4 heads, width 256, context 128, batch 16).
//!
//! Tessera's side writes the model's initial weights to `--init` (a safetensors file); the
//! PyTorch peer (`xtask/peers/gpt_torch.py`, the same architecture in `gpt_model.py`) loads them,
//! so both sides run the same model. The step is `train --model gpt`'s: forward, cross-entropy,
//! backward, gradient clipping, AdamW (decay on matrices only). Generation is greedy from a
//! one-token prompt until the context is full (`block - 1` new tokens, no re-encoding).

use std::path::PathBuf;

use clap::Args;
use tessera_autograd::Var;
use tessera_core::{Backend, Generator};
use tessera_nn::clip::clip_grad_norm;
use tessera_nn::data::SplitMix64;
use tessera_nn::gpt::{generate, GptConfig, SamplingConfig};
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::precision::Precision;
use tessera_nn::Module;

use crate::bench::precision::PeerPrecision;
use crate::bench::record::Record;
use crate::bench::timing::Protocol;
use crate::process::workspace_root;
use crate::TaskResult;

/// The suite's name.
pub const NAME: &str = "gpt";

/// Where the initial weights go when `--init` is not given (relative to the workspace root,
/// where both sides run).
pub const DEFAULT_INIT: &str = "target/bench/gpt-init.safetensors";

/// Arguments of the `gpt` suite (the peer takes the same words).
#[derive(Debug, Clone, PartialEq, Args)]
pub struct GptArgs {
    /// Sequences per training step.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Context length.
    #[arg(long, default_value_t = 128)]
    pub block: usize,
    /// Transformer blocks.
    #[arg(long, default_value_t = 4)]
    pub layers: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    /// Model width.
    #[arg(long, default_value_t = 256)]
    pub width: usize,
    /// Vocabulary size.
    #[arg(long, default_value_t = 128)]
    pub vocab: usize,
    /// Timed repetitions of each case [default: enough for about 1.5 s, at least 5].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub reps: Option<u64>,
    /// The safetensors file of the initial weights [default: target/bench/gpt-init.safetensors].
    #[arg(long)]
    pub init: Option<PathBuf>,
    /// The precision of both sides: f32, or bf16 (Tessera's bf16 policy, PyTorch's CPU
    /// autocast; f32 master weights on both) [default: tessera-bench's --precision].
    #[arg(long, value_enum)]
    pub precision: Option<PeerPrecision>,
}

impl GptArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        let mut args = vec![
            "--batch".to_string(),
            self.batch.to_string(),
            "--block".to_string(),
            self.block.to_string(),
            "--layers".to_string(),
            self.layers.to_string(),
            "--heads".to_string(),
            self.heads.to_string(),
            "--width".to_string(),
            self.width.to_string(),
            "--vocab".to_string(),
            self.vocab.to_string(),
        ];
        if let Some(reps) = self.reps {
            args.extend(["--reps".to_string(), reps.to_string()]);
        }
        if let Some(init) = &self.init {
            args.extend(["--init".to_string(), init.display().to_string()]);
        }
        if let Some(precision) = self.precision {
            args.extend(["--precision".to_string(), precision.word().to_string()]);
        }
        args
    }

    /// The model.
    pub fn config(&self) -> GptConfig {
        GptConfig::new(self.layers, self.heads, self.width, self.block, self.vocab)
    }

    /// The initial-weights file.
    pub fn init_path(&self) -> PathBuf {
        let path = self.init.clone().unwrap_or_else(|| DEFAULT_INIT.into());
        if path.is_absolute() {
            path
        } else {
            workspace_root().join(path)
        }
    }

    /// Multiply-adds of one token's forward pass: the weight matrices (`12·E²` per block, the
    /// head `E·V`) and causal attention (`T·E` per block on average: half of `q·kᵀ` and `p·v`).
    pub fn forward_macs_per_token(&self) -> f64 {
        let (e, t, l, v) = (
            self.width as f64,
            self.block as f64,
            self.layers as f64,
            self.vocab as f64,
        );
        l * (12.0 * e * e + t * e) + e * v
    }
}

/// Measures the training step and generation on `dev`, emitting a `train` and a `generate`
/// record (`n` is the tokens of one repetition, so `samples_per_s` is tokens/s).
pub fn measure<B: Backend>(
    dev: &B,
    args: &GptArgs,
    precision: Precision,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> TaskResult<()> {
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
    let config = args.config().precision(precision);
    let model = config.init(dev, &mut Generator::new(0))?;
    let init = args.init_path();
    if let Some(dir) = init.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    model.save(&init)?;

    // Training: one fixed random batch, the recipe of `train --model gpt`.
    let mut rng = SplitMix64::new(7);
    let ids: Vec<i64> = (0..args.batch * (args.block + 1))
        .map(|_| rng.below(args.vocab as u64) as i64)
        .collect();
    let all = tessera_core::Tensor::from_vec(ids, [args.batch, args.block + 1], dev)?;
    let x = all.narrow(1, 0, args.block)?.contiguous()?;
    let y = all.narrow(1, 1, args.block)?.contiguous()?;
    let (decay, plain): (Vec<_>, Vec<_>) = model
        .parameters()
        .into_iter()
        .partition(|(_, v): &(String, Var<B>)| v.rank() >= 2);
    let adamw = AdamWConfig {
        lr: 1e-3,
        betas: (0.9, 0.99),
        eps: 1e-8,
        weight_decay: 0.1,
        amsgrad: false,
    };
    let mut opt_decay = AdamW::new(decay, adamw)?;
    let mut opt_plain = AdamW::new(
        plain,
        AdamWConfig {
            weight_decay: 0.0,
            ..adamw
        },
    )?;
    let params: Vec<Var<B>> = model.parameters().into_iter().map(|(_, v)| v).collect();
    model.train();
    dev.synchronize()?;
    let reps = args.reps.map(|r| r as usize);
    let timing = protocol.measure(reps, || {
        opt_decay.zero_grad();
        opt_plain.zero_grad();
        let loss = model.loss(&x, &y)?;
        loss.backward()?;
        clip_grad_norm(&params, 1.0)?;
        opt_decay.step()?;
        opt_plain.step()?;
        dev.synchronize()?;
        Ok::<_, tessera_core::Error>(loss.value())
    })?;
    let tokens = args.batch * args.block;
    let macs = args.forward_macs_per_token() * tokens as f64;
    emit(
        Record::new(NAME, "tessera", dev.name(), tokens, &timing)
            .with_samples()
            .with_flops(2.0 * 3.0 * macs)
            .with_model(NAME)
            .with_phase("train"),
    );

    // Generation: greedy, batch 1, until the context is full.
    model.eval();
    let new_tokens = args.block.saturating_sub(1).max(1);
    let greedy = SamplingConfig::new().temperature(0.0);
    let timing = protocol.measure(reps, || {
        let mut sampler = greedy.sampler()?;
        let out = generate(&model, &[0], new_tokens, &mut sampler, &mut |_| {})?;
        dev.synchronize()?;
        Ok::<_, tessera_core::Error>(out)
    })?;
    emit(
        Record::new(NAME, "tessera", dev.name(), new_tokens, &timing)
            .with_samples()
            .with_flops(2.0 * args.forward_macs_per_token() * new_tokens as f64)
            .with_model(NAME)
            .with_phase("generate"),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gpt: GptArgs,
    }

    #[test]
    fn a_tiny_gpt_is_measured_and_its_weights_written() {
        let dir = std::env::temp_dir().join(format!("tessera-gpt-bench-{}", std::process::id()));
        let init = dir.join("init.safetensors");
        let words = [
            "gpt", "--batch", "2", "--block", "8", "--layers", "1", "--heads", "2", "--width",
            "16", "--vocab", "10", "--reps", "1", "--init",
        ];
        let mut argv: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        argv.push(init.display().to_string());
        let args = Cli::try_parse_from(&argv).unwrap().gpt;
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
        let phases: Vec<(&str, usize)> = records
            .iter()
            .map(|r| (r.phase.as_deref().unwrap(), r.n))
            .collect();
        assert_eq!(phases, [("train", 16), ("generate", 7)]);
        assert!(init.is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_precision_flag_round_trips_and_labels_the_records() {
        let dir = std::env::temp_dir().join(format!("tessera-gpt-bf16-{}", std::process::id()));
        let init = dir.join("init.safetensors");
        let mut argv: Vec<String> = [
            "gpt", "--batch", "2", "--block", "8", "--layers", "1", "--heads", "2", "--width",
            "16", "--vocab", "10", "--reps", "1", "--init",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        argv.extend([
            init.display().to_string(),
            "--precision".into(),
            "bf16".into(),
        ]);
        let args = Cli::try_parse_from(&argv).unwrap().gpt;
        assert_eq!(args.precision, Some(PeerPrecision::Bf16));
        assert_eq!(args.to_cli_args(), argv[1..]);
        let quick = Protocol::quick();
        let mut records = Vec::new();
        // The suite's flag wins over tessera-bench's global precision (f32 here).
        measure(
            &tessera_cpu::Cpu::new(),
            &args,
            Precision::F32,
            &quick,
            &mut |r| records.push(r),
        )
        .unwrap();
        assert_eq!(records.len(), 2);
        for r in &records {
            assert_eq!(r.precision.as_deref(), Some("bf16"), "{:?}", r.phase);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
