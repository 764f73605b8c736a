//! Llama's layers and model, and generation: `RmsNorm`, `SwiGlu`, `SiLU` and the tanh `GELU`
//! (as layers for the other steps, and against a reference computed here), `RotaryEmbedding`
//! (construction with odd sizes, bases and Llama 3 scalings; positions past the tables must be
//! an error; a rotation keeps every pair's norm), `LlamaConfig::init` with random (often
//! invalid) sizes, whose forward must agree with the cached forward and refuse positions past
//! `max_position_embeddings`, `SamplingConfig` (invalid temperatures, `top_k`, `top_p` are
//! errors; a valid one samples an index in range that respects its filters) and
//! `generate_until` on tiny GPT and Llama models.

use super::kinds::*;
use super::layers::layer;
use super::pretrained_files::llama_allocations;
use super::{alloc_work, op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome, Skip};
use crate::rng::Rng;
use tessera_autograd::Var;
use tessera_core::{DType, Error, Generator, Tensor};
use tessera_nn::generation::{generate_until, SamplingConfig};
use tessera_nn::gpt::GptConfig;
use tessera_nn::layers::{
    RmsNormConfig, RopeScaling, RotaryEmbedding, SiLU, SwiGlu, SwiGluConfig, GELU,
};
use tessera_nn::llama::{LlamaCache, LlamaConfig};
use tessera_nn::precision::Precision;
use tessera_nn::Forward;

/// Whether the documentation says a scaling is valid (Llama 3: `factor > 0`,
/// `high_freq_factor > low_freq_factor > 0`; linear: a finite `factor > 0`; dynamic: a finite
/// `factor >= 1` and an original context of at least one position).
fn scaling_ok(s: &RopeScaling) -> bool {
    match *s {
        RopeScaling::None => true,
        RopeScaling::Linear { factor } => factor.is_finite() && factor > 0.0,
        RopeScaling::Dynamic {
            factor,
            original_max_position_embeddings,
        } => factor.is_finite() && factor >= 1.0 && original_max_position_embeddings > 0,
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            ..
        } => factor > 0.0 && low_freq_factor > 0.0 && high_freq_factor > low_freq_factor,
    }
}

/// The rotary frequencies `RotaryEmbedding` computes for a call whose positions end at `len`
/// (repeated here, in the same f32 and f64 steps), or `None` for an invalid scaling. It
/// refuses frequencies that are not finite and positive (a tiny Llama 3 `factor` overflows
/// f32; a huge `theta`, or a dynamic scaling's stretched one, underflows to 0).
fn rope_frequencies(
    head_dim: usize,
    theta: f64,
    scaling: &RopeScaling,
    len: usize,
) -> Option<Vec<f32>> {
    if !scaling_ok(scaling) {
        return None;
    }
    let plain_of = |theta: f64| {
        (0..head_dim / 2).map(move |i| {
            let exponent = (2 * i) as f32 / head_dim as f32;
            1.0f32 / (theta as f32).powf(exponent)
        })
    };
    let plain = plain_of(theta);
    if let RopeScaling::Linear { factor } = *scaling {
        return Some(plain.map(|f| f / factor as f32).collect());
    }
    if let RopeScaling::Dynamic {
        factor,
        original_max_position_embeddings: original,
    } = *scaling
    {
        if len <= original {
            return Some(plain.collect());
        }
        let d = head_dim as f64;
        let stretch = factor * len as f64 / original as f64 - (factor - 1.0);
        return Some(plain_of(theta * stretch.powf(d / (d - 2.0))).collect());
    }
    let RopeScaling::Llama3 {
        factor,
        low_freq_factor,
        high_freq_factor,
        original_max_position_embeddings,
    } = *scaling
    else {
        return Some(plain.collect());
    };
    let old = original_max_position_embeddings as f64;
    let (low_wavelen, high_wavelen) = (old / low_freq_factor, old / high_freq_factor);
    Some(
        plain
            .map(|f| {
                let f = f as f64;
                let wavelen = 2.0 * std::f64::consts::PI / f;
                let scaled = if wavelen > low_wavelen {
                    f / factor
                } else if wavelen < high_wavelen {
                    f
                } else {
                    let smooth =
                        (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                    (1.0 - smooth) * f / factor + smooth * f
                };
                scaled as f32
            })
            .collect(),
    )
}

/// Whether `RotaryEmbedding` must accept the frequencies of calls ending at `len` (`new`
/// checks those of `len = 0`).
fn rope_frequencies_ok(head_dim: usize, theta: f64, scaling: &RopeScaling, len: usize) -> bool {
    rope_frequencies(head_dim, theta, scaling, len)
        .is_some_and(|f| f.iter().all(|f| f.is_finite() && *f > 0.0))
}

/// Random normal values, some rows zero, as an f32 or f64 tensor.
fn input<B: FuzzBackend>(
    dims: &[usize],
    seed: u64,
    f64_input: bool,
    scale: f64,
    b: &B,
) -> tessera_core::Result<Tensor<B>> {
    let mut rng = Rng::new(seed);
    let row = dims.last().copied().unwrap_or(1).max(1);
    let n: usize = dims.iter().product();
    let zero_row = rng.chance(30).then(|| rng.below(n.div_ceil(row).max(1)));
    let values: Vec<f64> = (0..n)
        .map(|i| {
            if Some(i / row) == zero_row {
                0.0
            } else {
                // Roughly normal (a sum of uniforms), times the scale.
                let u: f64 = (0..4)
                    .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
                    .sum();
                (u - 2.0) * 1.7 * scale
            }
        })
        .collect();
    let dtype = if f64_input { DType::F64 } else { DType::F32 };
    Tensor::from_f64_values(&values, dims.to_vec(), dtype, b)
}

/// Checks `got` against `want` within `tol` (relative to the magnitude, at least 1).
fn close(what: &str, got: &[f64], want: &[f64], tol: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} values, expected {}",
            got.len(),
            want.len()
        ));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * w.abs().max(1.0) || (g.is_nan() && w.is_nan());
        if !ok {
            return Err(format!("{what}: value {i} is {g}, the reference {w}"));
        }
    }
    Ok(())
}

/// `x · W^T + b` for row-major `x: [rows, i]`, `w: [o, i]`.
fn linear_ref(x: &[f64], rows: usize, w: &[f64], bias: Option<&[f64]>, o: usize) -> Vec<f64> {
    let i = w.len() / o.max(1);
    let mut out = vec![0.0; rows * o];
    for r in 0..rows {
        for k in 0..o {
            let mut s = bias.map_or(0.0, |b| b[k]);
            for j in 0..i {
                s += x[r * i + j] * w[k * i + j];
            }
            out[r * o + k] = s;
        }
    }
    out
}

fn silu_ref(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

fn gelu_tanh_ref(x: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (k * (x + 0.044_715 * x * x * x)).tanh())
}

/// RmsNorm, SiLU, the tanh GELU and SwiGlu on a small input against a reference.
fn layer_reference<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<Outcome<B>, Skip> {
    let b = c.backend();
    let (dim, rows) = (c.size(0) % 12 + 1, c.size(1) % 4 + 1);
    let f64_input = c.flag(4);
    let tol = if f64_input { 1e-9 } else { 2e-4 };
    let which = c.size(5) % 4;
    let scale = [1.0, 0.01, 30.0, 1000.0][c.size(5) / 4 % 4];
    let x = match input(&[rows, dim], c.seed(3), f64_input, scale, b) {
        Ok(x) => x,
        Err(e) => return Ok(Outcome::Err(e.to_string())),
    };
    let xs = x
        .to_vec_f64()
        .map_err(|_| Skip("the input does not read back"))?;
    let xv = Var::constant(x.clone());
    let r = (|| -> Result<Outcome<B>, String> {
        match which {
            0 => {
                let eps = c.float(2);
                let norm = RmsNormConfig::new(dim).eps(eps).dtype(x.dtype()).init(b);
                let valid = eps.is_finite() && eps > 0.0;
                let norm = match (norm, valid) {
                    (Ok(n), true) => n,
                    (Err(e), false) => return Ok(Outcome::Err(e.to_string())),
                    (Ok(_), false) => return Err(format!("RmsNorm accepted eps {eps}")),
                    (Err(e), true) => return Err(format!("RmsNorm refused eps {eps}: {e}")),
                };
                let y = norm.forward(&xv).map_err(|e| e.to_string())?;
                let ys = y.value().to_vec_f64().map_err(|e| e.to_string())?;
                // The mean square and eps are summed in the input's float type (f32 for f32).
                let narrow = |v: f64| if f64_input { v } else { v as f32 as f64 };
                let want: Vec<f64> = (0..rows)
                    .flat_map(|r| {
                        let row = &xs[r * dim..(r + 1) * dim];
                        let ms = row.iter().map(|v| v * v).sum::<f64>() / dim as f64;
                        let denom = (narrow(ms) + narrow(eps)).sqrt();
                        row.iter().map(move |v| v / denom).collect::<Vec<_>>()
                    })
                    .collect();
                close("RmsNorm", &ys, &want, tol * 10.0)?;
            }
            1 | 2 => {
                let (name, y) = if which == 1 {
                    ("SiLU", SiLU::new().forward(&xv))
                } else {
                    ("GELU::tanh", GELU::tanh().forward(&xv))
                };
                let ys = y
                    .and_then(|y| y.value().to_vec_f64())
                    .map_err(|e| e.to_string())?;
                let f: fn(f64) -> f64 = if which == 1 { silu_ref } else { gelu_tanh_ref };
                let want: Vec<f64> = xs.iter().map(|&v| f(v)).collect();
                close(name, &ys, &want, tol)?;
            }
            _ => {
                let hidden = c.size(1) % 9 + 1;
                let mut g = Generator::new(c.seed(3));
                let mlp: SwiGlu<B> = SwiGluConfig::new(dim, hidden)
                    .bias(c.flag(4))
                    .dtype(x.dtype())
                    .init(b, &mut g)
                    .map_err(|e| format!("a small SwiGlu did not build: {e}"))?;
                let ys = mlp
                    .forward(&xv)
                    .and_then(|y| y.value().to_vec_f64())
                    .map_err(|e| e.to_string())?;
                let read = |l: &tessera_nn::layers::Linear<B>| {
                    let w = l.weight().value().to_vec_f64();
                    let bias = l.bias().map(|b| b.value().to_vec_f64()).transpose();
                    (w, bias)
                };
                let lin = |l: &tessera_nn::layers::Linear<B>, x: &[f64], o: usize| {
                    let (w, bias) = read(l);
                    let (w, bias) = (
                        w.map_err(|e| e.to_string())?,
                        bias.map_err(|e| e.to_string())?,
                    );
                    Ok::<_, String>(linear_ref(x, rows, &w, bias.as_deref(), o))
                };
                let gate = lin(&mlp.gate_proj, &xs, hidden)?;
                let up = lin(&mlp.up_proj, &xs, hidden)?;
                let h: Vec<f64> = gate
                    .iter()
                    .zip(&up)
                    .map(|(g, u)| silu_ref(*g) * u)
                    .collect();
                let want = lin(&mlp.down_proj, &h, dim)?;
                close("SwiGlu", &ys, &want, tol * 10.0)?;
            }
        }
        Ok(Outcome::Ok(Vec::new()))
    })();
    Ok(r.unwrap_or_else(Outcome::Break))
}

/// A Llama configuration from the arguments: small and mostly valid (sometimes made invalid
/// on purpose) when the flag at 7 is set, the sizes as drawn otherwise. Returns the
/// configuration and, for small ones, whether it is valid.
fn llama_config<B: FuzzBackend>(c: &Ctx<'_, B>) -> (LlamaConfig, Option<bool>) {
    let mut rng = Rng::new(c.seed(8));
    let s = |i: usize| c.size(i);
    let precision = Precision::ALL[s(9) % 3];
    if !c.flag(7) {
        let heads = s(1);
        let config = LlamaConfig::new(s(0), s(3), s(4), s(5), heads, s(2), s(6))
            .head_dim_override((s(9) > 3).then_some(s(9)))
            .precision(precision);
        return (config, None);
    }
    let kv = s(2) % 3 + 1;
    let heads = kv * (s(1) % 3 + 1);
    let d = 2 * (s(3) % 4 + 1);
    let mut config = LlamaConfig::new(
        s(0) % 40 + 1,
        heads * d,
        s(4) % 24 + 1,
        s(5) % 3 + 1,
        heads,
        kv,
        s(6) % 12 + 1,
    )
    .precision(precision)
    .tie_word_embeddings(rng.chance(40))
    .attention_bias(rng.chance(25))
    .mlp_bias(rng.chance(25))
    .rms_norm_eps(rng.pick(&[1e-6, 1e-5, 0.1]))
    .rope_theta(rng.pick(&[10_000.0, 500_000.0, 2.0]));
    if rng.chance(30) {
        let low = rng.pick(&[0.5, 1.0, 2.0]);
        config = config.rope_scaling(match rng.below(3) {
            0 => RopeScaling::Llama3 {
                factor: rng.pick(&[1.0, 8.0, 32.0]),
                low_freq_factor: low,
                high_freq_factor: low * rng.pick(&[1.5, 4.0]),
                original_max_position_embeddings: rng.pick(&[2, 8, 8192]),
            },
            1 => RopeScaling::Linear {
                factor: rng.pick(&[0.5, 2.0, 4.0]),
            },
            _ => RopeScaling::Dynamic {
                factor: rng.pick(&[1.0, 2.0, 8.0]),
                original_max_position_embeddings: rng.pick(&[1, 4, 8]),
            },
        });
    }
    if rng.chance(20) {
        // A head width other than hidden / heads.
        config = config.head_dim_override(Some(2 * rng.range(1, 5)));
    }
    // Now and then, one thing wrong.
    match rng.below(12) {
        0 => config.num_key_value_heads = heads + 1,
        1 => config.head_dim_override = Some(rng.pick(&[0, 1, 3, 5])),
        2 => {
            config.hidden_size += 1;
            config.head_dim_override = None;
        }
        3 => match rng.below(5) {
            0 => config.vocab_size = 0,
            1 => config.num_hidden_layers = 0,
            2 => config.intermediate_size = 0,
            3 => config.max_position_embeddings = 0,
            _ => config.num_attention_heads = 0,
        },
        4 => config.rms_norm_eps = rng.pick(&[0.0, -1.0, f64::NAN, f64::INFINITY]),
        5 => config.rope_theta = rng.pick(&[1.0, 0.5, f64::NAN, f64::INFINITY, -3.0]),
        6 => config.dtype = rng.pick(&[DType::I64, DType::Bool, DType::F64, DType::F16]),
        7 => {
            config.rope_scaling = RopeScaling::Llama3 {
                factor: rng.pick(&[0.0, -1.0, 8.0]),
                low_freq_factor: rng.pick(&[0.0, 4.0, 1.0]),
                high_freq_factor: rng.pick(&[1.0, 4.0]),
                original_max_position_embeddings: 8,
            }
        }
        _ => {}
    }
    let h = config.num_attention_heads;
    let d = config.head_dim();
    let valid = [
        config.vocab_size,
        config.hidden_size,
        config.intermediate_size,
        config.num_hidden_layers,
        h,
        config.num_key_value_heads,
        config.max_position_embeddings,
    ]
    .iter()
    .all(|&v| v > 0)
        && h % config.num_key_value_heads == 0
        && (config.head_dim_override.is_some() || config.hidden_size % h == 0)
        && d > 0
        && d % 2 == 0
        && config.rms_norm_eps.is_finite()
        && config.rms_norm_eps > 0.0
        && config.rope_theta.is_finite()
        && config.rope_theta > 1.0
        && config.dtype.is_float()
        && rope_frequencies_ok(d, config.rope_theta, &config.rope_scaling, 0);
    (config, Some(valid))
}

/// The work of a Llama step: its parameters (up to the first allocation that must fail), its
/// caches, and the forward passes.
fn llama_work<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<usize, Skip> {
    let (config, _) = llama_config(c);
    if config.validate().is_err() {
        return Ok(1);
    }
    let d = config.head_dim();
    // The caches grow on demand from 256 positions; the rotary angles are computed per call.
    let max = config.max_position_embeddings.min(256);
    let allocations = llama_allocations(&config);
    let params = allocations.work();
    if allocations.fails() {
        // An allocation fails: nothing runs after it.
        return Ok(params);
    }
    let cache = max
        .saturating_mul(d)
        .saturating_mul(config.num_key_value_heads)
        .saturating_mul(config.num_hidden_layers)
        .saturating_mul(4);
    Ok(params.saturating_mul(12).saturating_add(alloc_work(cache)))
}

/// `LlamaConfig::init`, forward, loss, and the cached forward in two pieces, then past the
/// last position.
fn llama_forward<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<Outcome<B>, Skip> {
    let b = c.backend();
    let (config, valid) = llama_config(c);
    let mut g = Generator::new(c.seed(8));
    let model = match (config.init(b, &mut g), valid) {
        (Ok(m), None | Some(true)) => m,
        (Err(e), None | Some(false)) => return Ok(Outcome::Err(e.to_string())),
        (Ok(_), Some(false)) => {
            return Ok(Outcome::Break(format!(
                "an invalid {config:?} was accepted"
            )))
        }
        (Err(e), Some(true)) => {
            return Ok(Outcome::Break(format!(
                "a valid {config:?} was refused: {e}"
            )))
        }
    };
    let mut rng = Rng::new(c.seed(8) ^ 0xF00D);
    let max = config.max_position_embeddings;
    let (batch, t) = (rng.range(1, 2), rng.range(1, max.min(6)));
    let ids: Vec<i64> = (0..batch * t)
        .map(|_| rng.below(config.vocab_size) as i64)
        .collect();
    let tokens = |from: usize, to: usize| -> tessera_core::Result<Tensor<B>> {
        let part: Vec<i64> = (0..batch)
            .flat_map(|r| ids[r * t + from..r * t + to].to_vec())
            .collect();
        Tensor::from_vec(part, [batch, to - from], b)
    };
    let exact =
        config.precision == Precision::F32 && matches!(config.dtype, DType::F32 | DType::F64);
    let r = (|| -> Result<Outcome<B>, String> {
        let idx = tokens(0, t).map_err(|e| e.to_string())?;
        let logits = model
            .forward(&idx)
            .map_err(|e| format!("forward of valid ids: {e}"))?;
        let v = config.vocab_size;
        if logits.dims() != [batch, t, v] {
            return Err(format!("logits {} for [{batch}, {t}] ids", logits.shape()));
        }
        let full = logits.value().to_vec_f64().map_err(|e| e.to_string())?;
        if full.iter().any(|x| !x.is_finite()) {
            return Err("logits are not finite".into());
        }
        let loss = model
            .loss(&idx, &idx)
            .and_then(|l| l.value().to_vec_f64())
            .map_err(|e| format!("loss of valid ids: {e}"))?;
        if !loss.iter().all(|l| l.is_finite() && *l >= 0.0) {
            return Err(format!("loss {loss:?}"));
        }
        // The cached forward in two pieces gives the same rows.
        let mut cache = LlamaCache::new(&config, batch, b).map_err(|e| e.to_string())?;
        let split = rng.range(0, t);
        let mut cached = vec![Vec::new(); batch];
        for (from, to) in [(0, split), (split, t)] {
            if from == to {
                continue;
            }
            let out = model
                .forward_cached(&tokens(from, to).map_err(|e| e.to_string())?, &mut cache)
                .map_err(|e| format!("forward_cached of positions {from}..{to}: {e}"))?;
            if out.dims() != [batch, to - from, v] {
                return Err(format!(
                    "cached logits {} for {} positions",
                    out.shape(),
                    to - from
                ));
            }
            let out = out.to_vec_f64().map_err(|e| e.to_string())?;
            for (r, row) in cached.iter_mut().enumerate() {
                row.extend_from_slice(&out[r * (to - from) * v..(r + 1) * (to - from) * v]);
            }
        }
        let cached: Vec<f64> = cached.concat();
        // Dynamic NTK scaling rotates each call's positions with the frequencies of its own
        // length (as `transformers` does within a call): a first piece of `split` positions
        // past or short of the original context is rotated unlike the whole `t` positions
        // once `t` passes it, so only the other cases must agree.
        let frequencies_differ = match config.rope_scaling {
            RopeScaling::Dynamic {
                original_max_position_embeddings: original,
                ..
            } => t > original && 0 < split && split < t,
            _ => false,
        };
        if exact && !frequencies_differ {
            close("forward_cached against forward", &cached, &full, 1e-4)?;
        }
        // Rewound to a prefix, the cache decodes the rest again.
        let keep = rng.below(t + 1);
        cache.truncate(keep);
        if cache.len() != keep {
            return Err(format!(
                "truncate({keep}) of {t} positions left {}",
                cache.len()
            ));
        }
        if keep < t {
            let again = model
                .forward_cached(&tokens(keep, t).map_err(|e| e.to_string())?, &mut cache)
                .and_then(|l| l.to_vec_f64())
                .map_err(|e| format!("forward_cached after truncate({keep}): {e}"))?;
            let want: Vec<f64> = (0..batch)
                .flat_map(|r| full[(r * t + keep) * v..(r + 1) * t * v].to_vec())
                .collect();
            if exact {
                close("forward_cached after truncate", &again, &want, 1e-4)?;
            }
        }
        if max > 64 {
            return Ok(Outcome::Ok(Vec::new()));
        }
        // Fill the cache to the last position; one more is an error.
        let one = Tensor::from_vec(vec![0i64; batch], [batch, 1], b).map_err(|e| e.to_string())?;
        while cache.len() < max {
            model
                .forward_cached(&one, &mut cache)
                .map_err(|e| format!("forward_cached at {} of {max}: {e}", cache.len()))?;
        }
        match model.forward_cached(&one, &mut cache) {
            Err(Error::InvalidArgument { .. }) => {}
            other => {
                return Err(format!(
                    "a position past max_position_embeddings {max}: {:?}",
                    other.map(|t| t.dims().to_vec())
                ))
            }
        }
        {
            let long = Tensor::from_vec(vec![0i64; max + 1], [1, max + 1], b)
                .map_err(|e| e.to_string())?;
            if model.forward(&long).is_ok() {
                return Err(format!(
                    "forward of {} positions, max {max}, succeeded",
                    max + 1
                ));
            }
        }
        Ok(Outcome::Ok(Vec::new()))
    })();
    Ok(r.unwrap_or_else(|e| Outcome::Break(format!("{config:?}: {e}"))))
}

/// The head width and positions of a rotary step: mostly an even width (sometimes odd), the
/// size as drawn when it is large.
fn rope_sizes<B: FuzzBackend>(c: &Ctx<'_, B>) -> (usize, usize) {
    let s = c.size(0);
    let d = match (s, c.seed(8) % 5) {
        (0..=19, 0) => s,
        (0..=19, _) => 2 * (s % 8 + 1),
        _ => s,
    };
    (d, c.size(1))
}

/// `RotaryEmbedding::new` and `apply` with odd sizes, bases, scalings and positions.
fn rotary<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<Outcome<B>, Skip> {
    let (d, max) = rope_sizes(c);
    let theta = match c.seed(8) % 4 {
        0 => c.float(2),
        1 => 500_000.0,
        _ => 10_000.0,
    };
    let scaling = if c.flag(5) {
        match c.seed(8) / 4 % 3 {
            0 => {
                let low = c.float(7).abs();
                RopeScaling::Llama3 {
                    factor: c.float(6),
                    low_freq_factor: low,
                    high_freq_factor: if c.size(4) % 3 == 0 { low } else { low * 4.0 },
                    original_max_position_embeddings: c.size(4),
                }
            }
            1 => RopeScaling::Linear { factor: c.float(6) },
            _ => RopeScaling::Dynamic {
                factor: c.float(6),
                original_max_position_embeddings: c.size(4) % 8,
            },
        }
    } else {
        RopeScaling::None
    };
    let valid = d > 0
        && d % 2 == 0
        && theta.is_finite()
        && theta > 1.0
        && max.checked_mul(d).is_some()
        && rope_frequencies_ok(d, theta, &scaling, 0);
    let rope = match (RotaryEmbedding::new(d, max, theta, scaling), valid) {
        (Ok(r), true) => r,
        (Err(e), false) => return Ok(Outcome::Err(e.to_string())),
        (Ok(_), false) => {
            return Ok(Outcome::Break(format!(
                "RotaryEmbedding::new({d}, {max}, {theta}, {scaling:?}) accepted"
            )))
        }
        (Err(e), true) => {
            return Ok(Outcome::Break(format!(
                "RotaryEmbedding::new({d}, {max}, {theta}, {scaling:?}) refused: {e}"
            )))
        }
    };
    let (start, len) = (c.size(3), c.size(4) % 6);
    let b = c.backend();
    if d.saturating_mul(2 * len) > 1 << 22 {
        return Err(Skip("the input would be too large"));
    }
    let x = input(&[1, 2, len, d], c.seed(8), false, 1.0, b).map_err(|_| Skip("no input"))?;
    let xs = x.to_vec_f64().map_err(|_| Skip("no input"))?;
    // Positions past usize::MAX are as far past the end as any (a regression test of the
    // overflow `apply(x, usize::MAX)` had).
    let fits = start.checked_add(len).is_some_and(|end| end <= max);
    let applied = rope.apply(&Var::constant(x), start);
    // A dynamic scaling's frequencies for a long call can underflow where `new`'s did not.
    if fits && !rope_frequencies_ok(d, theta, &scaling, start + len) {
        return Ok(match applied {
            Err(Error::InvalidArgument { .. }) => {
                Outcome::Err("frequencies not finite and positive".into())
            }
            Err(e) => Outcome::Break(format!("apply at {start} of {len}: {e}")),
            Ok(_) => Outcome::Break(format!(
                "apply at {start} of {len} with unusable frequencies of {scaling:?} succeeded"
            )),
        });
    }
    Ok(match (applied, fits) {
        (Err(Error::InvalidArgument { .. }), false) => {
            Outcome::Err("positions past the tables".into())
        }
        (Err(e), _) => Outcome::Break(format!(
            "apply at {start} of {len} positions (max {max}): {e}"
        )),
        (Ok(_), false) => Outcome::Break(format!(
            "apply at {start} of {len} positions past the {max} the tables cover succeeded"
        )),
        (Ok(y), true) => {
            let ys = match y.value().to_vec_f64() {
                Ok(v) => v,
                Err(e) => return Ok(Outcome::Break(e.to_string())),
            };
            // Each pair (i, i + d/2) turns by an angle: its norm stays; position 0 does not turn.
            let half = d / 2;
            let mut bad = None;
            for (row, (xr, yr)) in xs.chunks(d).zip(ys.chunks(d)).enumerate() {
                for i in 0..half {
                    let before = xr[i] * xr[i] + xr[i + half] * xr[i + half];
                    let after = yr[i] * yr[i] + yr[i + half] * yr[i + half];
                    if (before - after).abs() > 1e-4 * before.max(1.0) || !after.is_finite() {
                        bad = Some(format!(
                            "pair {i} of row {row}: |x|² {before}, |y|² {after}"
                        ));
                    }
                }
                let position = start + row % len.max(1);
                if position == 0 && xr != yr {
                    bad = Some(format!("row {row} at position 0 was turned"));
                }
            }
            match bad {
                Some(e) => Outcome::Break(format!(
                    "RotaryEmbedding::new({d}, {max}, {theta}, {scaling:?}).apply(x, {start}): {e}"
                )),
                None => Outcome::Ok(Vec::new()),
            }
        }
    })
}

/// `SamplingConfig::sampler` and `Sampler::sample`.
fn sampling<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let mut rng = Rng::new(c.bytes(5).seed);
    // Mostly valid values: the drawn floats are often negative.
    let temperature = match rng.chance(60) {
        true => c.float(0).abs(),
        false => c.float(0),
    };
    let top_k = c.flag(2).then(|| c.size(1));
    let top_p = c.flag(4).then(|| match rng.chance(60) {
        true => (c.float(3) / 10.0).abs().min(1.0),
        false => c.float(3),
    });
    let config = SamplingConfig::new()
        .temperature(temperature)
        .top_k(top_k)
        .top_p(top_p)
        .seed(rng.next_u64());
    let valid = temperature.is_finite()
        && temperature >= 0.0
        && top_k != Some(0)
        && top_p.is_none_or(|p| p > 0.0 && p <= 1.0);
    let mut sampler = match (config.sampler(), valid) {
        (Ok(s), true) => s,
        (Err(Error::InvalidArgument { .. }), false) => {
            return Outcome::Err("invalid sampling refused".into())
        }
        (r, _) => {
            return Outcome::Break(format!(
                "{config:?}.sampler() gave {:?}",
                r.map(|_| ()).map_err(|e| e.to_string())
            ))
        }
    };
    // Documented: an empty slice gives 0 (there is no index to give).
    if sampler.clone().sample(&[]) != 0 {
        return Outcome::Break("sample(&[]) is not the documented 0".into());
    }
    let len = c.size(6) % 64 + 1;
    let special = rng.chance(20);
    let logits: Vec<f64> = (0..len)
        .map(|_| {
            if special && rng.chance(20) {
                rng.pick(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, -1e300])
            } else {
                (rng.below(2001) as f64 - 1000.0) / rng.pick(&[1.0, 100.0, 1e4])
            }
        })
        .collect();
    let finite = logits.iter().all(|x| x.is_finite());
    for _ in 0..8 {
        let i = sampler.sample(&logits);
        if i >= len {
            return Outcome::Break(format!("{config:?} sampled {i} of {len} logits"));
        }
        if !finite {
            continue;
        }
        let x = logits[i];
        let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        if temperature == 0.0 && x != max {
            return Outcome::Break(format!("greedy sampling picked {x}, the max is {max}"));
        }
        if let Some(k) = top_k {
            let greater = logits.iter().filter(|&&y| y > x).count();
            if greater >= k {
                return Outcome::Break(format!("top_k {k} picked a logit with {greater} above it"));
            }
        }
        if let (Some(p), true) = (top_p, temperature > 0.0) {
            // The tokens strictly more likely than the pick (before top-k) must not reach p
            // alone (the nucleus is the fewest most likely tokens reaching p).
            let scaled: Vec<f64> = logits.iter().map(|&y| y / temperature).collect();
            let m = scaled.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            if m.is_finite() && top_k.is_none() {
                let w: Vec<f64> = scaled.iter().map(|&y| (y - m).exp()).collect();
                let total: f64 = w.iter().sum();
                let above: f64 = w.iter().filter(|&&y| y > w[i]).sum();
                if above > p * total * (1.0 + 1e-9) + 1e-300 {
                    return Outcome::Break(format!(
                        "top_p {p} picked a token with probability {} above it",
                        above / total
                    ));
                }
            }
        }
    }
    Outcome::Ok(Vec::new())
}

/// `generate_until` on a tiny random GPT or Llama: prompts empty, out of the vocabulary, longer
/// than the context; stop tokens; the report against the documented behaviour.
fn generation<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let b = c.backend();
    let mut g = Generator::new(c.seed(7));
    let mut rng = Rng::new(c.bytes(3).seed);
    let vocab = 5 + rng.below(20);
    let max_pos = c.size(2) % 8 + 1;
    let prompt_len = c.size(0) % 12;
    let max_new = c.size(1) % 24;
    let prompt: Vec<usize> = (0..prompt_len)
        .map(|_| {
            if rng.chance(3) {
                rng.pick(&[vocab, vocab + 1, usize::MAX])
            } else {
                rng.below(vocab)
            }
        })
        .collect();
    let stop: Vec<usize> = if c.flag(4) {
        (0..rng.range(1, 3)).map(|_| rng.below(vocab)).collect()
    } else {
        Vec::new()
    };
    let temperature = c.float(5);
    let sampler = SamplingConfig::new()
        .temperature(temperature)
        .top_k(rng.chance(30).then(|| rng.range(1, 4)))
        .seed(rng.next_u64())
        .sampler();
    let mut sampler = match sampler {
        Ok(s) => s,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    let mut seen = Vec::new();
    let report = if c.flag(6) {
        let model = LlamaConfig::new(vocab, 8, 12, 1, 2, 1, max_pos).init(b, &mut g);
        model.and_then(|m| {
            generate_until(&m, &prompt, max_new, &stop, &mut sampler, &mut |t| {
                seen.push(t)
            })
        })
    } else {
        let model = GptConfig::new(1, 2, 8, max_pos, vocab).init(b, &mut g);
        model.and_then(|m| {
            generate_until(&m, &prompt, max_new, &stop, &mut sampler, &mut |t| {
                seen.push(t)
            })
        })
    };
    let valid_prompt = !prompt.is_empty() && prompt.iter().all(|&t| t < vocab);
    let r = match (report, valid_prompt) {
        (Err(Error::InvalidArgument { .. }), false) => {
            return Outcome::Err("bad prompt refused".into())
        }
        (Err(e), _) => Err(format!("generation failed: {e}")),
        (Ok(_), false) => Err(format!(
            "prompt {prompt:?} of a vocabulary of {vocab} accepted"
        )),
        (Ok(r), true) => {
            let stopped_at = r.tokens.iter().position(|t| stop.contains(t));
            if r.tokens != seen {
                Err(format!("tokens {:?} but on_token saw {seen:?}", r.tokens))
            } else if r.tokens.iter().any(|&t| t >= vocab) {
                Err(format!(
                    "tokens {:?} outside the vocabulary of {vocab}",
                    r.tokens
                ))
            } else if r.stopped != stopped_at.is_some()
                || stopped_at.is_some_and(|i| i + 1 != r.tokens.len())
            {
                Err(format!(
                    "tokens {:?}, stop {stop:?}, stopped {}",
                    r.tokens, r.stopped
                ))
            } else if !r.stopped && r.tokens.len() != max_new {
                Err(format!(
                    "{} tokens of {max_new} without a stop",
                    r.tokens.len()
                ))
            } else if prompt.len() + r.tokens.len() <= max_pos && r.context_refills != 0 {
                Err(format!(
                    "{} refills for {} tokens in a context of {max_pos}",
                    r.context_refills,
                    prompt.len() + r.tokens.len()
                ))
            } else {
                Ok(())
            }
        }
    };
    match r {
        Ok(()) => Outcome::Ok(Vec::new()),
        Err(e) => Outcome::Break(format!(
            "prompt {prompt:?}, max_new {max_new}, max positions {max_pos}: {e}"
        )),
    }
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op("RmsNormConfig::init", 2, &[SIZE, F, DT], OUT_L, |c| {
            let dim = c.size(0);
            let r = RmsNormConfig::new(dim)
                .eps(c.float(1))
                .dtype(c.dtype(2))
                .init(c.backend());
            Ok(r.map(|l| layer(l, 4)).into())
        })
        .work(|c| Ok(alloc_work(c.size(0)))),
        op(
            "SwiGluConfig::init",
            2,
            &[SIZE, SIZE, B, DT, SIZE, SEED],
            OUT_L,
            |c| {
                let (dim, hidden) = (c.size(0), c.size(1));
                let mut g = Generator::new(c.seed(5));
                let r = SwiGluConfig::new(dim, hidden)
                    .bias(c.flag(2))
                    .dtype(c.dtype(3))
                    .precision(Precision::ALL[c.size(4) % 3])
                    .init(c.backend(), &mut g);
                Ok(r.map(|l| layer(l, hidden.saturating_mul(3))).into())
            },
        )
        .work(|c| {
            Ok(alloc_work(
                c.size(0).saturating_mul(c.size(1)).saturating_mul(3),
            ))
        }),
        op("SiLU::new / GELU::tanh", 2, &[B], OUT_L, |c| {
            Ok(Outcome::Ok(vec![crate::machine::Value::Layer(
                if c.flag(0) {
                    layer(SiLU::new(), 1)
                } else {
                    layer(GELU::tanh(), 1)
                },
            )]))
        }),
        op(
            "RmsNorm, SiLU, GELU::tanh, SwiGlu: forward against a reference",
            3,
            &[SIZE, SIZE, F, SEED, B, SIZE],
            NONE,
            |c| layer_reference(c),
        )
        .work(|_| Ok(1 << 10)),
        op(
            "LlamaConfig::init, forward, loss, forward_cached",
            4,
            &[SIZE, SIZE, SIZE, SIZE, SIZE, SIZE, SIZE, B, SEED, SIZE],
            NONE,
            |c| llama_forward(c),
        )
        .work(llama_work),
        op(
            "RotaryEmbedding::new, apply",
            3,
            &[SIZE, SIZE, F, SIZE, SIZE, B, F, F, SEED],
            NONE,
            |c| rotary(c),
        )
        .work(|c| {
            let (d, max) = rope_sizes(c);
            let tables = max.saturating_mul(d).saturating_mul(2);
            Ok(tables.saturating_add(d.saturating_mul(12)))
        }),
        op(
            "SamplingConfig::sampler, Sampler::sample",
            3,
            &[F, SIZE, B, F, B, BYTES, SIZE],
            NONE,
            |c| Ok(sampling(c)),
        ),
        op(
            "generate_until (tiny GPT or Llama)",
            2,
            &[SIZE, SIZE, SIZE, BYTES, B, F, B, SEED],
            NONE,
            |c| Ok(generation(c)),
        )
        .work(|_| Ok(1 << 14)),
    ]
}
