//! Issue 14's API: scaled dot-product attention (the `Tensor` and `Var` methods, its gradient,
//! and the `Backend` method called directly with unchecked parameters), the attention and
//! transformer layers, the GPT model, the character tokenizer and token windows.

use super::kinds::*;
use super::layers::layer;
use super::{alloc_work, has, op, out_tensor, FuzzBackend, Op, LAYER_WORK};
use crate::args::Kind;
use crate::machine::Ctx;
use crate::rng::Rng;
use tessera_autograd::Var;
use tessera_core::attention::AttentionParams;
use tessera_core::{AttentionDropout, AttentionOptions, DType, Generator, Tensor};
use tessera_nn::data::{CharTokenizer, SplitMix64, TokenWindows};
use tessera_nn::gpt::{GptCache, GptConfig};
use tessera_nn::layers::{KvCache, MultiHeadAttentionConfig, TransformerBlockConfig};
use tessera_nn::precision::Precision;
use tessera_nn::Forward;

/// Three tensor outputs.
const OUT_TTT: &[Kind] = &[Kind::Tensor, Kind::Tensor, Kind::Tensor];

/// The work of attention over the tensors at `q`, `k`, `v`: every query meets every key, in
/// the widths of both products.
fn attention_work<B: FuzzBackend>(c: &Ctx<'_, B>, q: usize, k: usize, v: usize) -> usize {
    let (Ok(q), Ok(k), Ok(v)) = (c.t(q), c.t(k), c.t(v)) else {
        return 0;
    };
    let rows = |t: &Tensor<B>| t.dims().iter().rev().nth(1).copied().unwrap_or(1);
    let width = |t: &Tensor<B>| t.dims().last().copied().unwrap_or(1);
    let per_pair = width(&q).saturating_add(width(&v)).max(1);
    // Every query row (all dimensions but the last: an empty last axis still has rows) meets
    // every key row.
    let dims = q.dims();
    let query_rows = dims[..dims.len().saturating_sub(1)]
        .iter()
        .fold(1usize, |n, &d| n.saturating_mul(d));
    query_rows
        .saturating_mul(rows(&k))
        .saturating_mul(per_pair)
        .saturating_add(k.numel())
        .saturating_add(v.numel())
}

/// The documented output shape of attention: `q`'s with `v`'s last axis.
fn attention_dims<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    q: usize,
    v: usize,
) -> Result<Vec<usize>, String> {
    let (q, v) = (c.t(q).map_err(|_| "gone")?, c.t(v).map_err(|_| "gone")?);
    let mut dims = q.dims().to_vec();
    let last = dims
        .last_mut()
        .ok_or("attention of a rank-0 query succeeded")?;
    *last = *v
        .dims()
        .last()
        .ok_or("attention of a rank-0 value succeeded")?;
    Ok(dims)
}

/// Checks the output of an attention step with q at 0 and v at 2.
fn attention_out<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    out: &[crate::machine::Value<B>],
) -> Result<(), String> {
    let dims = attention_dims(c, 0, 2)?;
    let dtype = c.t(0).map_err(|_| "gone")?.dtype();
    has(out_tensor(out)?, &dims, dtype)
}

/// The size-like argument at `i`, kept below `cap` when `small` (so that most models are
/// buildable) and left as drawn otherwise (0, huge).
fn model_size<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize, cap: usize, small: bool) -> usize {
    let s = c.size(i);
    if small {
        s % cap + 1
    } else {
        s
    }
}

/// A GPT config from the arguments starting at `i` (six sizes, a flag for "small", a
/// dropout).
pub(super) fn gpt_config<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize) -> GptConfig {
    let small = c.flag(i + 5);
    let n_head = model_size(c, i + 1, 3, small);
    GptConfig::new(
        model_size(c, i, 2, small),
        n_head,
        if small {
            n_head * model_size(c, i + 2, 4, true)
        } else {
            c.size(i + 2)
        },
        model_size(c, i + 3, 8, small),
        model_size(c, i + 4, 16, small),
    )
    .dropout(c.float(i + 6))
}

/// The width and heads of an attention layer from the sizes at `i`, `i + 1`: a buildable pair
/// when `small` (heads dividing the width), as drawn otherwise.
fn attention_shape<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize, small: bool) -> (usize, usize) {
    let h = model_size(c, i + 1, 3, small);
    let e = if small {
        h * model_size(c, i, 4, true)
    } else {
        c.size(i)
    };
    (e, h)
}

/// The work of building a GPT of `config`: its parameters, and each block's own cost
/// ([`LAYER_WORK`], whatever its width), saturating.
pub(super) fn gpt_work(config: &GptConfig) -> usize {
    let e = config.n_embd;
    let per_layer = e.saturating_mul(e).saturating_mul(12);
    let n = per_layer
        .saturating_mul(config.n_layer)
        .saturating_add(config.vocab_size.saturating_mul(e))
        .saturating_add(config.block_size.saturating_mul(e));
    alloc_work(n).saturating_add(config.n_layer.saturating_mul(LAYER_WORK))
}

/// Text from the bytes argument at `i` (lossy UTF-8).
fn text<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize) -> String {
    String::from_utf8_lossy(&super::files::make_bytes(c.bytes(i))).into_owned()
}

/// Token ids drawn from the seed at `i`: mostly small, sometimes huge.
fn token_ids<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize, len: usize) -> Vec<usize> {
    let mut rng = Rng::new(c.seed(i));
    (0..len.min(256))
        .map(|_| match rng.below(8) {
            0 => rng.pick(&[usize::MAX, u32::MAX as usize + 1, 1 << 40]),
            _ => rng.below(16),
        })
        .collect()
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op(
            "Tensor::scaled_dot_product_attention",
            5,
            &[T, T, T, B, F, B],
            OUT_T,
            |c| {
                let mut options = AttentionOptions::new().causal(c.flag(3));
                if c.flag(5) {
                    options = options.scale(c.float(4));
                }
                Ok(c.t(0)?
                    .scaled_dot_product_attention(&c.t(1)?, &c.t(2)?, &options)
                    .into())
            },
        )
        .work(|c| Ok(attention_work(c, 0, 1, 2)))
        .expect(attention_out),
        op(
            "Tensor::scaled_dot_product_attention (mask)",
            4,
            &[T, T, T, T, B],
            OUT_T,
            |c| {
                let mask = c.t(3)?;
                let options = AttentionOptions::new().causal(c.flag(4)).mask(&mask);
                Ok(c.t(0)?
                    .scaled_dot_product_attention(&c.t(1)?, &c.t(2)?, &options)
                    .into())
            },
        )
        .work(|c| Ok(attention_work(c, 0, 1, 2)))
        .expect(attention_out),
        op(
            "Tensor::scaled_dot_product_attention (dropout)",
            3,
            &[T, T, T, F, SEED, SIZE],
            OUT_T,
            |c| {
                let dropout = AttentionDropout {
                    p: c.float(3),
                    seed: c.seed(4),
                    offset: c.size(5) as u64,
                };
                let options = AttentionOptions::new().dropout(dropout);
                Ok(c.t(0)?
                    .scaled_dot_product_attention(&c.t(1)?, &c.t(2)?, &options)
                    .into())
            },
        )
        .work(|c| Ok(attention_work(c, 0, 1, 2)))
        .expect(attention_out),
        op(
            "Tensor::scaled_dot_product_attention_backward",
            3,
            &[T, T, T, T, B],
            OUT_TTT,
            |c| {
                let (q, k, v, g) = (c.t(0)?, c.t(1)?, c.t(2)?, c.t(3)?);
                let options = AttentionOptions::new().causal(c.flag(4));
                let r = q
                    .scaled_dot_product_attention_with_lse(&k, &v, &options)
                    .and_then(|fwd| {
                        g.scaled_dot_product_attention_backward(&q, &k, &v, &options, &fwd)
                    })
                    .map(|grads| (grads.q, grads.k, grads.v));
                Ok(r.into())
            },
        )
        .work(|c| Ok(attention_work(c, 0, 1, 2).saturating_mul(3)))
        .expect(|c, out| {
            for (i, o) in out.iter().enumerate() {
                let x = c.t(i).map_err(|_| "gone")?;
                match o {
                    crate::machine::Value::Tensor(t) => has(t, x.dims(), x.dtype())?,
                    _ => return Err("expected tensors".into()),
                }
            }
            Ok(())
        }),
        op(
            "Backend::scaled_dot_product_attention",
            3,
            &[T, T, T, F, B, F],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                // The public backend method, with parameters Tensor never builds: any scale,
                // any dropout probability.
                let params = AttentionParams {
                    scale: c.float(3),
                    causal: c.flag(4),
                    dropout: Some(AttentionDropout {
                        p: c.float(5),
                        seed: 1,
                        offset: 0,
                    }),
                };
                let (q, k, v) = (c.t(0)?, c.t(1)?, c.t(2)?);
                let inputs = tessera_core::AttentionInputs {
                    q: &q,
                    k: &k,
                    v: &v,
                    mask: None,
                };
                Ok(c.backend()
                    .scaled_dot_product_attention(inputs, &params)
                    .map(|o| o.out)
                    .into())
            },
        )
        .work(|c| Ok(attention_work(c, 0, 1, 2))),
        op(
            "Var::scaled_dot_product_attention",
            4,
            &[V, V, V, B],
            OUT_V,
            |c| {
                let options = AttentionOptions::new().causal(c.flag(3));
                Ok(c.v(0)?
                    .scaled_dot_product_attention(&c.v(1)?, &c.v(2)?, &options)
                    .into())
            },
        )
        .work(|c| {
            let n = [c.v(0)?, c.v(1)?, c.v(2)?]
                .iter()
                .map(|v| v.numel())
                .fold(1usize, |a, n| a.saturating_mul(n.max(1)));
            Ok(n.min(usize::MAX / 2))
        }),
        op(
            "MultiHeadAttentionConfig::init",
            3,
            &[SIZE, SIZE, F, B, DT, SEED],
            OUT_L,
            |c| {
                let (e, h) = (c.size(0), c.size(1));
                let mut g = Generator::new(c.seed(5));
                let built = MultiHeadAttentionConfig::new(e, h)
                    .dropout(c.float(2))
                    .bias(c.flag(3))
                    .dtype(c.dtype(4))
                    .init(c.backend(), &mut g);
                Ok(built.map(|l| layer(l, e.saturating_mul(4))).into())
            },
        )
        .work(|c| {
            Ok(alloc_work(
                c.size(0).saturating_mul(c.size(0)).saturating_mul(4),
            ))
        }),
        op(
            "TransformerBlockConfig::init",
            3,
            &[SIZE, SIZE, SIZE, F, B, DT, SEED],
            OUT_L,
            |c| {
                let (e, h, ratio) = (c.size(0), c.size(1), c.size(2));
                let mut g = Generator::new(c.seed(6));
                let built = TransformerBlockConfig::new(e, h)
                    .mlp_ratio(ratio)
                    .dropout(c.float(3))
                    .bias(c.flag(4))
                    .dtype(c.dtype(5))
                    .init(c.backend(), &mut g);
                Ok(built.map(|l| layer(l, e.saturating_mul(12))).into())
            },
        )
        .work(|c| {
            let e = c.size(0);
            let per = e
                .saturating_mul(e)
                .saturating_mul(c.size(2).saturating_add(4));
            Ok(alloc_work(per))
        }),
        op(
            "MultiHeadAttention under a precision policy: forward_self, forward_cached",
            3,
            &[SIZE, SIZE, SIZE, V, T, SIZE, SEED, B],
            OUT_V,
            |c| {
                let small = c.flag(7);
                let (e, h) = attention_shape(c, 0, small);
                let precision = Precision::ALL[c.size(2) % Precision::ALL.len()];
                let mut g = Generator::new(c.seed(6));
                // Small: a random input of the layer's width and no extra mask (most calls
                // succeed); otherwise the registers as drawn.
                let (x, mask) = match small {
                    true => {
                        let dims = [c.size(5) % 3 + 1, c.size(2) / 3 % 5 + 1, e];
                        let x = Tensor::randn(dims, DType::F32, c.seed(6), c.backend());
                        (x.map(Var::param), None)
                    }
                    false => (Ok(c.v(3)?), Some(c.t(4)?)),
                };
                let r = x.and_then(|x| {
                    let attn = MultiHeadAttentionConfig::new(e, h)
                        .precision(precision)
                        .init(c.backend(), &mut g)?;
                    let y = attn.forward_self(&x, true, mask.as_ref())?;
                    y.sum_all()?.backward()?;
                    if let [batch, n, ..] = *x.dims() {
                        let dtype = precision.compute_dtype().unwrap_or(x.dtype());
                        let head = e / h.max(1);
                        let capacity = n.saturating_add(c.size(5) % 4);
                        let mut cache = KvCache::new(batch, h, capacity, head, dtype, c.backend())?;
                        attn.forward_cached(&x, &mut cache)?;
                    }
                    Ok(y)
                });
                Ok(r.into())
            },
        )
        .work(|c| {
            let small = c.flag(7);
            let e = attention_shape(c, 0, small).0;
            let x = if small { 3 * 5 * e } else { c.v(3)?.numel() };
            Ok(alloc_work(e.saturating_mul(e).saturating_mul(4))
                .saturating_add(x.saturating_mul(x).saturating_mul(4)))
        })
        .expect(|c, out| match out.first() {
            Some(crate::machine::Value::Var(v)) if v.dtype() == DType::F32 || !c.flag(7) => Ok(()),
            Some(crate::machine::Value::Var(v)) => Err(format!(
                "the output of an f32 input under a 16-bit policy is {}",
                v.dtype()
            )),
            _ => Err("expected a var".into()),
        }),
        op(
            "TransformerBlockConfig::init with a precision policy, forward",
            3,
            &[SIZE, SIZE, SIZE, SIZE, V, SEED, B],
            OUT_V,
            |c| {
                let small = c.flag(6);
                let (e, h) = attention_shape(c, 0, small);
                let ratio = model_size(c, 2, 4, small);
                let precision = Precision::ALL[c.size(3) % Precision::ALL.len()];
                let mut g = Generator::new(c.seed(5));
                let x = match small {
                    true => {
                        let dims = [c.size(3) % 2 + 1, c.size(3) / 3 % 5 + 1, e];
                        let x = Tensor::randn(dims, DType::F32, c.seed(5), c.backend());
                        x.map(Var::param)
                    }
                    false => Ok(c.v(4)?),
                };
                let r = x.and_then(|x| {
                    let block = TransformerBlockConfig::new(e, h)
                        .mlp_ratio(ratio)
                        .precision(precision)
                        .init(c.backend(), &mut g)?;
                    let y = block.forward(&x)?;
                    y.sum_all()?.backward()?;
                    Ok(y)
                });
                Ok(r.into())
            },
        )
        .work(|c| {
            let small = c.flag(6);
            let e = attention_shape(c, 0, small).0;
            let per = e
                .saturating_mul(e)
                .saturating_mul(model_size(c, 2, 4, small).saturating_add(4));
            let x = if small { 2 * 5 * e } else { c.v(4)?.numel() };
            Ok(alloc_work(per).saturating_add(x.saturating_mul(x).saturating_mul(4)))
        }),
        op(
            "Gpt under a precision policy: forward, loss, backward, cached forward",
            2,
            &[SIZE, SIZE, SIZE, SIZE, SIZE, B, F, T, SEED, SIZE],
            OUT_V,
            |c| {
                let precision = Precision::ALL[c.size(9) % Precision::ALL.len()];
                let config = gpt_config(c, 0).precision(precision);
                let mut g = Generator::new(c.seed(8));
                // Small models get valid token ids (most calls succeed); the others the
                // register as drawn.
                let idx = match c.flag(5) {
                    true => {
                        let t = c.size(9) / 3 % config.block_size.max(1) + 1;
                        let ids: Vec<i64> = token_ids(c, 8, 2 * t)
                            .into_iter()
                            .map(|i| (i % config.vocab_size.max(1)) as i64)
                            .collect();
                        let t = ids.len() / 2;
                        Tensor::from_vec(ids[..2 * t].to_vec(), [2, t], c.backend())
                    }
                    false => Ok(c.t(7)?),
                };
                let r = idx.and_then(|idx| {
                    let gpt = config.init(c.backend(), &mut g)?;
                    let logits = gpt.forward(&idx)?;
                    gpt.loss(&idx, &idx)?.backward()?;
                    let batch = idx.dims().first().copied().unwrap_or(1);
                    let mut cache = GptCache::new(gpt.config(), batch, c.backend())?;
                    gpt.forward_cached(&idx, &mut cache)?;
                    Ok(logits)
                });
                Ok(r.into())
            },
        )
        .work(|c| {
            let config = gpt_config(c, 0);
            let tokens = if c.flag(5) {
                2 * config.block_size
            } else {
                c.t(7)?.numel()
            };
            Ok(gpt_work(&config).saturating_add(
                tokens
                    .saturating_mul(config.n_embd.max(1))
                    .saturating_mul(config.vocab_size.max(config.block_size).max(1))
                    .saturating_mul(4),
            ))
        })
        .expect(|c, out| {
            // The logits keep the parameters' dtype whatever the policy.
            match out.first() {
                Some(crate::machine::Value::Var(v)) if v.dtype() == gpt_config(c, 0).dtype => {
                    Ok(())
                }
                Some(crate::machine::Value::Var(v)) => {
                    Err(format!("the logits of a 16-bit policy are {}", v.dtype()))
                }
                _ => Err("expected a var".into()),
            }
        }),
        op(
            "GptConfig::from_json (precision)",
            2,
            &[BYTES, SIZE],
            NONE,
            |c| {
                let precision = Precision::ALL[c.size(1) % Precision::ALL.len()];
                let config = GptConfig::new(1, 1, 4, 4, 4).precision(precision);
                let mut json = config.to_json();
                match GptConfig::from_json(&json) {
                    Ok(back) if back == config => {}
                    other => {
                        return Ok(crate::machine::Outcome::Break(format!(
                            "the JSON round trip of {config:?} gave {other:?}"
                        )))
                    }
                }
                // Any other precision text is refused with an error, never a panic.
                json["precision"] = serde_json::Value::String(text(c, 0));
                let _ = GptConfig::from_json(&json);
                Ok(crate::machine::Outcome::Ok(Vec::new()))
            },
        ),
        op(
            "Gpt: init, forward, loss",
            3,
            &[SIZE, SIZE, SIZE, SIZE, SIZE, B, F, T, SEED],
            OUT_V,
            |c| {
                let config = gpt_config(c, 0);
                let mut g = Generator::new(c.seed(8));
                let idx = c.t(7)?;
                let r = config.init(c.backend(), &mut g).and_then(|gpt| {
                    let logits = gpt.forward(&idx)?;
                    gpt.loss(&idx, &idx)?;
                    Ok(logits)
                });
                Ok(r.into())
            },
        )
        .work(|c| {
            let config = gpt_config(c, 0);
            let tokens = c.t(7)?.numel();
            Ok(gpt_work(&config).saturating_add(
                tokens
                    .saturating_mul(config.n_embd.max(1))
                    .saturating_mul(config.vocab_size.max(config.block_size).max(1)),
            ))
        }),
        op(
            "CharTokenizer: from_text, encode, decode",
            2,
            &[BYTES, BYTES],
            NONE,
            |c| {
                let (corpus, other) = (text(c, 0), text(c, 1));
                let tok = CharTokenizer::from_text(&corpus);
                let ids = match tok.encode(&corpus) {
                    Ok(ids) => ids,
                    Err(e) => {
                        return Ok(crate::machine::Outcome::Break(format!(
                            "the vocabulary of a text cannot encode it: {e}"
                        )))
                    }
                };
                if tok.decode(&ids).ok().as_deref() != Some(corpus.as_str()) {
                    return Ok(crate::machine::Outcome::Break(
                        "decode(encode(text)) != text".into(),
                    ));
                }
                let _ = tok.encode(&other);
                let _ = tok.decode(&[usize::MAX, tok.vocab_size()]);
                let back = CharTokenizer::from_json(&tok.to_json());
                Ok(back
                    .map(|b| {
                        if b.chars() == tok.chars() {
                            Ok(())
                        } else {
                            Err("the JSON round trip changed the vocabulary")
                        }
                    })
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(str::to_string))
                    .into())
            },
        ),
        op(
            "TokenWindows: new, split, batches",
            2,
            &[SEED, SIZE, SIZE, SIZE, SIZE],
            OUT_TT,
            |c| {
                let tokens = token_ids(c, 0, c.size(1));
                let (block, batch) = (c.size(2), c.size(3));
                let mut rng = SplitMix64::new(c.seed(0));
                let _ = TokenWindows::split(&tokens, block, c.size(4), c.size(3));
                let r = TokenWindows::new(&tokens, block)
                    .and_then(|w| w.random_batch(batch, &mut rng, c.backend()));
                Ok(r.into())
            },
        )
        .work(|c| Ok(alloc_work(c.size(3).saturating_mul(c.size(2).min(256))))),
        op(
            "Tensor::to_backend (example and back)",
            3,
            &[T],
            OUT_T,
            |c| {
                let t = c.t(0)?;
                let there = t.to_backend(&tessera_backend_example::ExampleBackend::new());
                Ok(there.and_then(|x| x.to_backend(c.backend())).into())
            },
        )
        .expect(|c, out| {
            let t = c.t(0).map_err(|_| "gone")?;
            let o = out_tensor(out)?;
            has(o, t.dims(), t.dtype())?;
            let (a, b) = (t.to_vec_f64(), o.to_vec_f64());
            match (a, b) {
                (Ok(a), Ok(b)) if !super::same_values(&a, &b) => {
                    Err("values changed on the round trip".into())
                }
                _ => Ok(()),
            }
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_cpu::Cpu;

    /// The first fuzz finding of 2026-12-06: `Gpt: init, forward, loss` with 2^20 blocks of
    /// width 1 (12 parameters each) was under the budget, then ran the child out of memory
    /// (each block's tensors and graph nodes weigh ~58 KiB whatever its width).
    #[test]
    fn a_gpt_of_a_million_tiny_blocks_is_over_the_budget() {
        let many = GptConfig::new(1 << 20, 1, 1, 4, 1);
        assert!(gpt_work(&many) > <Cpu as FuzzBackend>::WORK_BUDGET);
        // A small model's work is still well inside it.
        let small = GptConfig::new(2, 2, 8, 8, 16);
        assert!(gpt_work(&small) < <Cpu as FuzzBackend>::WORK_BUDGET / 64);
    }
}
