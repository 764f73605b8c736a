//! Tessera's side of the GPT training parity check (`xtask/peers/gpt_parity.py` runs it and
//! then PyTorch): initialises a small GPT, writes its weights and a fixed list of batches to
//! safetensors files, trains on them with the `train --model gpt` recipe (AdamW with decay on
//! matrices only, warm-up then cosine, gradient clipping at 1) and writes the loss of every
//! step to `tessera.json`.
//!
//! ```text
//! cargo run --release -p tessera-cli --example gpt_parity -- OUT_DIR f64 20
//! ```

use std::path::PathBuf;
use tessera_autograd::Var;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint;
use tessera_nn::clip::clip_grad_norm;
use tessera_nn::data::SplitMix64;
use tessera_nn::gpt::GptConfig;
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::schedule::{CosineAnnealing, LinearWarmup, LrSchedule};
use tessera_nn::Module;

/// The model and recipe both sides use.
const LAYERS: usize = 2;
const HEADS: usize = 2;
const WIDTH: usize = 32;
const BLOCK: usize = 16;
const VOCAB: usize = 40;
const BATCH: usize = 4;
const LR: f64 = 3e-3;
const MIN_LR: f64 = 3e-4;
const WARMUP: usize = 4;
const WEIGHT_DECAY: f64 = 0.1;
const CLIP: f64 = 1.0;

fn main() -> tessera_core::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = PathBuf::from(args.first().map_or("target/gpt-parity", String::as_str));
    let dtype = match args.get(1).map(String::as_str) {
        Some("f32") => DType::F32,
        _ => DType::F64,
    };
    let steps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    std::fs::create_dir_all(&out).map_err(|e| tessera_core::Error::io(&out, e))?;
    let dev = Cpu::new();

    let config = GptConfig::new(LAYERS, HEADS, WIDTH, BLOCK, VOCAB).dtype(dtype);
    let model = config.init(&dev, &mut Generator::new(42))?;
    model.save(out.join("init.safetensors"))?;

    // Learnable batches (each row counts from a random start by a random stride, so the
    // losses fall as the model picks the pattern up from its context); both sides read these
    // very tensors.
    let mut rng = SplitMix64::new(7);
    let mut batches = Vec::new();
    let mut named = Vec::new();
    for step in 0..steps {
        let mut ids = Vec::with_capacity(BATCH * (BLOCK + 1));
        for _ in 0..BATCH {
            let (start, stride) = (rng.below(VOCAB as u64), 1 + rng.below(3));
            ids.extend((0..=BLOCK as u64).map(|i| ((start + i * stride) % VOCAB as u64) as i64));
        }
        let all = Tensor::from_vec(ids, [BATCH, BLOCK + 1], &dev)?;
        let (x, y) = (
            all.narrow(1, 0, BLOCK)?.contiguous()?,
            all.narrow(1, 1, BLOCK)?.contiguous()?,
        );
        named.push((format!("x.{step}"), x.clone()));
        named.push((format!("y.{step}"), y.clone()));
        batches.push((x, y));
    }
    checkpoint::save(
        out.join("batches.safetensors"),
        named.iter().map(|(n, t)| (n, t)),
        &Default::default(),
    )?;

    let (decay, no_decay): (Vec<_>, Vec<_>) = model
        .parameters()
        .into_iter()
        .partition(|(_, v): &(String, Var<Cpu>)| v.rank() >= 2);
    let base = AdamWConfig {
        lr: LR,
        betas: (0.9, 0.99),
        eps: 1e-8,
        weight_decay: WEIGHT_DECAY,
        amsgrad: false,
    };
    let mut opt_decay = AdamW::new(decay, base)?;
    let mut opt_plain = AdamW::new(
        no_decay,
        AdamWConfig {
            weight_decay: 0.0,
            ..base
        },
    )?;
    let params: Vec<Var<Cpu>> = model.parameters().into_iter().map(|(_, v)| v).collect();
    let cosine = CosineAnnealing::new(LR, steps.saturating_sub(WARMUP).max(1), MIN_LR)?;
    let schedule = LinearWarmup::new(cosine, WARMUP, 1.0 / (WARMUP as f64 + 1.0))?;

    let (mut losses, mut lrs, mut norms) = (Vec::new(), Vec::new(), Vec::new());
    model.train();
    for (step, (x, y)) in batches.iter().enumerate() {
        let lr = schedule.lr_at(step);
        opt_decay.set_learning_rate(lr);
        opt_plain.set_learning_rate(lr);
        opt_decay.zero_grad();
        opt_plain.zero_grad();
        let loss = model.loss(x, y)?;
        loss.backward()?;
        norms.push(clip_grad_norm(&params, CLIP)?);
        opt_decay.step()?;
        opt_plain.step()?;
        losses.push(loss.value().to_scalar_f64()?);
        lrs.push(lr);
    }
    let report = serde_json::json!({
        "dtype": dtype.to_string(),
        "config": config.to_json(),
        "batch": BATCH,
        "lr": LR, "min_lr": MIN_LR, "warmup": WARMUP, "weight_decay": WEIGHT_DECAY,
        "betas": [0.9, 0.99], "eps": 1e-8, "clip": CLIP,
        "losses": losses,
        "lrs": lrs,
        "grad_norms": norms,
    });
    let path = out.join("tessera.json");
    std::fs::write(&path, report.to_string()).map_err(|e| tessera_core::Error::io(&path, e))?;
    println!("{}", path.display());
    Ok(())
}
