//! The fused attention kernels against a naive f64 reference written here (forward) and
//! tensor-core's composite default (both passes): several key blocks (online softmax
//! rescaling), causal masking with `L < S`, `L = S` and `L > S`, bool padding masks with fully
//! masked rows, additive masks, non-contiguous q/k/v from a head split, dropout, rank 2, empty
//! dimensions, and sizes that take the parallel path.

use crate::common::*;
use tessera_core::AttentionInputs;
use tessera_core::{
    composite, AttentionDropout, AttentionOptions, AttentionOutput, AttentionParams, DType,
    Distribution, Tensor,
};
use tessera_cpu::{Cpu, CpuTensor};

/// One attention problem.
struct Case {
    batch: Vec<usize>,
    l: usize,
    s: usize,
    e: usize,
    ev: usize,
    causal: bool,
    /// `[..b, L, S]` values: `Some(true)` attend, `Some(false)` masked; None: no mask.
    bool_mask: Option<Vec<bool>>,
    additive: Option<Vec<f64>>,
    dropout: Option<AttentionDropout>,
}

impl Case {
    fn new(batch: &[usize], l: usize, s: usize, e: usize, ev: usize) -> Self {
        Case {
            batch: batch.to_vec(),
            l,
            s,
            e,
            ev,
            causal: false,
            bool_mask: None,
            additive: None,
            dropout: None,
        }
    }

    fn nb(&self) -> usize {
        self.batch.iter().product()
    }

    fn dims(&self, rows: usize, cols: usize) -> Vec<usize> {
        let mut d = self.batch.clone();
        d.extend([rows, cols]);
        d
    }
}

/// The naive reference: `[nb, L, Ev]` in f64, dropout drawn in `dtype`'s precision.
fn reference(c: &Case, q: &[f64], k: &[f64], v: &[f64], dtype: DType) -> Vec<f64> {
    let (l, s, e, ev) = (c.l, c.s, c.e, c.ev);
    let scale = 1.0 / (e.max(1) as f64).sqrt();
    let mut out = vec![0.0; c.nb() * l * ev];
    for b in 0..c.nb() {
        for i in 0..l {
            let mut scores = vec![f64::NEG_INFINITY; s];
            for (j, sc) in scores.iter_mut().enumerate() {
                let at = (b * l + i) * s + j;
                if c.causal && j > i {
                    continue;
                }
                if c.bool_mask.as_ref().is_some_and(|m| !m[at]) {
                    continue;
                }
                let dot: f64 = (0..e)
                    .map(|d| q[(b * l + i) * e + d] * k[(b * s + j) * e + d])
                    .sum();
                *sc = dot * scale + c.additive.as_ref().map_or(0.0, |m| m[at]);
            }
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            if max == f64::NEG_INFINITY {
                continue;
            }
            let total: f64 = scores.iter().map(|x| (x - max).exp()).sum();
            for j in 0..s {
                let mut p = (scores[j] - max).exp() / total;
                if let Some(d) = c.dropout {
                    let index = d.offset + ((b * l + i) * s + j) as u64;
                    let uniform = Distribution::Uniform {
                        low: 0.0,
                        high: 1.0,
                    };
                    let u = match dtype {
                        DType::F32 => {
                            tessera_core::random::sample_f32(uniform, d.seed, index) as f64
                        }
                        _ => tessera_core::random::sample_f64(uniform, d.seed, index),
                    };
                    p = if u >= d.p { p / (1.0 - d.p) } else { 0.0 };
                }
                for d in 0..ev {
                    out[(b * l + i) * ev + d] += p * v[(b * s + j) * ev + d];
                }
            }
        }
    }
    out
}

/// The case's tensors in `dtype`: q, k, v and the mask, with the f64 values they hold.
struct Built {
    q: CpuTensor,
    k: CpuTensor,
    v: CpuTensor,
    mask: Option<CpuTensor>,
    values: [Vec<f64>; 3],
}

fn build(c: &Case, dtype: DType, seed: u64) -> Built {
    let make = |rows, cols, seed| {
        let dims = c.dims(rows, cols);
        let n = dims.iter().product();
        let raw = values(n, seed, -1.5, 1.5);
        let (t, held) = if dtype == DType::F32 {
            (tensor_f32(&raw, &dims), as_f32(&raw))
        } else {
            (tensor_f64(&raw, &dims), raw)
        };
        (t, held)
    };
    let (q, qv) = make(c.l, c.e, seed);
    let (k, kv) = make(c.s, c.e, seed + 1);
    let (v, vv) = make(c.s, c.ev, seed + 2);
    let dims = c.dims(c.l, c.s);
    let mask = match (&c.bool_mask, &c.additive) {
        (Some(m), _) => {
            let bits: Vec<u8> = m.iter().map(|&b| b as u8).collect();
            Some(CpuTensor::from_host(tessera_core::HostData::Bool(bits), dims, &cpu()).unwrap())
        }
        (None, Some(a)) => Some(
            CpuTensor::from_vec(a.clone(), dims, &cpu())
                .unwrap()
                .to_dtype(dtype)
                .unwrap(),
        ),
        _ => None,
    };
    Built {
        q,
        k,
        v,
        mask,
        values: [qv, kv, vv],
    }
}

fn options<'a>(c: &Case, mask: Option<&'a CpuTensor>) -> AttentionOptions<'a, Cpu> {
    let mut o = AttentionOptions::new().causal(c.causal);
    if let Some(m) = mask {
        o = o.mask(m);
    }
    if let Some(d) = c.dropout {
        o = o.dropout(d);
    }
    o
}

fn params(c: &Case) -> AttentionParams {
    AttentionParams {
        scale: 1.0 / (c.e.max(1) as f64).sqrt(),
        causal: c.causal,
        dropout: c.dropout,
    }
}

fn tolerance(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        2e-5
    } else {
        1e-12
    }
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g == w || (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

fn f64s(t: &CpuTensor) -> Vec<f64> {
    t.to_vec_f64().unwrap()
}

/// Checks the fused forward against the reference and both passes against the composite.
fn check(c: &Case, what: &str) {
    for dtype in [DType::F32, DType::F64] {
        let what = format!("{what} {dtype}");
        let t = build(c, dtype, 11);
        let fused =
            t.q.scaled_dot_product_attention_with_lse(&t.k, &t.v, &options(c, t.mask.as_ref()))
                .unwrap();
        assert_eq!(fused.out.dims(), c.dims(c.l, c.ev).as_slice(), "{what}");
        let [qv, kv, vv] = &t.values;
        let want = reference(c, qv, kv, vv, dtype);
        assert_close(
            &f64s(&fused.out),
            &want,
            tolerance(dtype),
            &format!("{what} forward"),
        );

        let mask = t
            .mask
            .as_ref()
            .map(|m| m.broadcast_to(c.dims(c.l, c.s)).unwrap());
        let p = params(c);
        let composite = composite::scaled_dot_product_attention(
            AttentionInputs {
                q: &t.q,
                k: &t.k,
                v: &t.v,
                mask: mask.as_ref(),
            },
            &p,
        )
        .unwrap();
        assert_close(
            &f64s(&fused.logsumexp),
            &f64s(&composite.logsumexp),
            tolerance(dtype),
            &format!("{what} logsumexp"),
        );

        let g = tensor_like(dtype, &c.dims(c.l, c.ev), 99);
        let grads = g
            .scaled_dot_product_attention_backward(
                &t.q,
                &t.k,
                &t.v,
                &options(c, t.mask.as_ref()),
                &fused,
            )
            .unwrap();
        let want = composite::scaled_dot_product_attention_backward(
            &g,
            AttentionInputs {
                q: &t.q,
                k: &t.k,
                v: &t.v,
                mask: mask.as_ref(),
            },
            &composite,
            &p,
        )
        .unwrap();
        for (name, got, want) in [
            ("dq", &grads.q, &want.q),
            ("dk", &grads.k, &want.k),
            ("dv", &grads.v, &want.v),
        ] {
            assert_close(
                &f64s(got),
                &f64s(want),
                10.0 * tolerance(dtype),
                &format!("{what} {name}"),
            );
        }
    }
}

fn tensor_like(dtype: DType, dims: &[usize], seed: u64) -> CpuTensor {
    let raw = values(dims.iter().product(), seed, -1.0, 1.0);
    match dtype {
        DType::F32 => tensor_f32(&raw, dims),
        _ => tensor_f64(&raw, dims),
    }
}

#[test]
fn plain_attention_matches_the_reference() {
    check(&Case::new(&[2, 3], 5, 7, 4, 6), "plain");
    check(&Case::new(&[], 3, 4, 2, 5), "rank 2");
    check(&Case::new(&[1], 1, 1, 1, 1), "single key");
}

#[test]
fn several_key_blocks_rescale_the_running_sum() {
    // 300 keys: three blocks; 70 queries: three query blocks, the last one partial.
    check(&Case::new(&[2], 70, 300, 8, 5), "blocks");
}

#[test]
fn causal_masking_is_top_left_aligned() {
    for (l, s) in [(6, 6), (4, 9), (9, 4), (150, 150)] {
        let mut c = Case::new(&[2], l, s, 3, 4);
        c.causal = true;
        check(&c, &format!("causal {l}x{s}"));
    }
}

#[test]
fn padding_masks_and_fully_masked_rows() {
    let (b, l, s) = (3, 5, 6);
    // Batch element 0 keeps 4 keys, 1 keeps all, 2 keeps none (every row fully masked).
    let keep = [4, 6, 0];
    let mask: Vec<bool> = (0..b * l * s)
        .map(|n| (n % s) < keep[n / (l * s)])
        .collect();
    let mut c = Case::new(&[b], l, s, 4, 3);
    c.bool_mask = Some(mask.clone());
    check(&c, "padding");
    c.causal = true;
    check(&c, "padding + causal");
    // The fully masked rows give zeros and zero gradients, like PyTorch.
    let t = build(&c, DType::F64, 5);
    let out =
        t.q.scaled_dot_product_attention(&t.k, &t.v, &options(&c, t.mask.as_ref()))
            .unwrap();
    let last = out.narrow(0, 2, 1).unwrap();
    assert!(f64s(&last).iter().all(|&x| x == 0.0));

    let additive: Vec<f64> = mask
        .iter()
        .zip(values(b * l * s, 3, -2.0, 2.0))
        .map(|(&m, x)| if m { x } else { f64::NEG_INFINITY })
        .collect();
    let mut c = Case::new(&[b], l, s, 4, 3);
    c.additive = Some(additive);
    check(&c, "additive");
}

#[test]
fn a_broadcast_key_padding_mask_is_read_through_zero_strides() {
    let dev = cpu();
    let (b, h, l, d) = (2, 3, 4, 2);
    let q = tensor_f64(&values(b * h * l * d, 1, -1.0, 1.0), &[b, h, l, d]);
    let keep: Vec<u8> = vec![1, 1, 0, 0, 1, 1, 1, 0];
    let mask =
        CpuTensor::from_host(tessera_core::HostData::Bool(keep), [b, 1, 1, l], &dev).unwrap();
    let options = AttentionOptions::new().mask(&mask);
    let fused = q
        .scaled_dot_product_attention_with_lse(&q, &q, &options)
        .unwrap();
    let full = mask
        .broadcast_to([b, h, l, l])
        .unwrap()
        .contiguous()
        .unwrap();
    let want = composite::scaled_dot_product_attention(
        AttentionInputs {
            q: &q,
            k: &q,
            v: &q,
            mask: Some(&full),
        },
        &AttentionParams {
            scale: 1.0 / (d as f64).sqrt(),
            causal: false,
            dropout: None,
        },
    )
    .unwrap();
    assert_close(&f64s(&fused.out), &f64s(&want.out), 1e-12, "broadcast mask");
}

#[test]
fn a_head_split_is_read_in_place() {
    // x: [b, t, 3·h·d] as a fused projection gives it, split into heads without copies.
    let (b, t, h, d) = (2, 9, 3, 4);
    let e = h * d;
    for dtype in [DType::F32, DType::F64] {
        let qkv = tensor_like(dtype, &[b, t, 3 * e], 7);
        let head = |i: usize| {
            qkv.narrow(2, i * e, e)
                .unwrap()
                .reshape([b, t, h, d])
                .unwrap()
                .permute(&[0, 2, 1, 3])
                .unwrap()
        };
        let (q, k, v) = (head(0), head(1), head(2));
        assert!(!q.is_contiguous());
        let options = AttentionOptions::new().causal(true);
        let fused = q
            .scaled_dot_product_attention_with_lse(&k, &v, &options)
            .unwrap();
        let (qc, kc, vc) = (
            q.contiguous().unwrap(),
            k.contiguous().unwrap(),
            v.contiguous().unwrap(),
        );
        let dense = qc
            .scaled_dot_product_attention_with_lse(&kc, &vc, &options)
            .unwrap();
        let tol = tolerance(dtype);
        assert_close(&f64s(&fused.out), &f64s(&dense.out), tol, "head split");
        // A transposed upstream gradient too.
        let g = tensor_like(dtype, &[b, h, d, t], 8)
            .transpose(-2, -1)
            .unwrap();
        let strided = g
            .scaled_dot_product_attention_backward(&q, &k, &v, &options, &fused)
            .unwrap();
        let gc = g.contiguous().unwrap();
        let dense_grads = gc
            .scaled_dot_product_attention_backward(&qc, &kc, &vc, &options, &dense)
            .unwrap();
        assert_close(&f64s(&strided.q), &f64s(&dense_grads.q), tol, "dq");
        assert_close(&f64s(&strided.k), &f64s(&dense_grads.k), tol, "dk");
        assert_close(&f64s(&strided.v), &f64s(&dense_grads.v), tol, "dv");
    }
}

#[test]
fn dropout_draws_the_composite_mask() {
    let mut c = Case::new(&[2, 2], 6, 5, 3, 4);
    c.dropout = Some(AttentionDropout {
        p: 0.3,
        seed: 17,
        offset: 5,
    });
    check(&c, "dropout");
    c.causal = true;
    check(&c, "dropout + causal");
}

#[test]
fn large_problems_take_the_parallel_path() {
    let mut c = Case::new(&[4, 2], 64, 64, 16, 16);
    c.causal = true;
    check(&c, "parallel");
}

#[test]
fn empty_dimensions() {
    // No keys: every row is fully masked, so zeros and a -inf log-sum-exp.
    let dev = cpu();
    let q = Tensor::<Cpu>::ones([2, 3, 4], DType::F32, &dev).unwrap();
    let k = Tensor::<Cpu>::ones([2, 0, 4], DType::F32, &dev).unwrap();
    let v = Tensor::<Cpu>::ones([2, 0, 5], DType::F32, &dev).unwrap();
    let AttentionOutput { out, logsumexp } = q
        .scaled_dot_product_attention_with_lse(&k, &v, &AttentionOptions::new())
        .unwrap();
    assert_eq!(out.dims(), [2, 3, 5]);
    assert!(f64s(&out).iter().all(|&x| x == 0.0));
    assert!(f64s(&logsumexp).iter().all(|&x| x == f64::NEG_INFINITY));
    // No queries, no features, no batch.
    for (qd, kd, vd) in [
        ([2, 0, 4], [2, 3, 4], [2, 3, 5]),
        ([2, 3, 0], [2, 3, 0], [2, 3, 5]),
        ([0, 3, 4], [0, 3, 4], [0, 3, 5]),
        ([2, 3, 4], [2, 3, 4], [2, 3, 0]),
    ] {
        let q = Tensor::<Cpu>::ones(qd, DType::F64, &dev).unwrap();
        let k = Tensor::<Cpu>::ones(kd, DType::F64, &dev).unwrap();
        let v = Tensor::<Cpu>::ones(vd, DType::F64, &dev).unwrap();
        let fused = q
            .scaled_dot_product_attention_with_lse(&k, &v, &AttentionOptions::new())
            .unwrap();
        let want = composite::scaled_dot_product_attention(
            AttentionInputs {
                q: &q,
                k: &k,
                v: &v,
                mask: None,
            },
            &AttentionParams {
                scale: 1.0 / (qd[2].max(1) as f64).sqrt(),
                causal: false,
                dropout: None,
            },
        )
        .unwrap();
        assert_eq!(fused.out.dims(), want.out.dims());
        assert_close(&f64s(&fused.out), &f64s(&want.out), 1e-12, "empty out");
        let g = Tensor::<Cpu>::ones(fused.out.dims(), DType::F64, &dev).unwrap();
        let grads = g
            .scaled_dot_product_attention_backward(&q, &k, &v, &AttentionOptions::new(), &fused)
            .unwrap();
        assert_eq!(grads.q.dims(), q.dims());
        assert_eq!(grads.k.dims(), k.dims());
        assert_eq!(grads.v.dims(), v.dims());
    }
}

#[test]
fn bad_operands_are_typed_errors() {
    let dev = cpu();
    let q = Tensor::<Cpu>::ones([2, 3, 4], DType::F32, &dev).unwrap();
    let k = Tensor::<Cpu>::ones([2, 5, 3], DType::F32, &dev).unwrap();
    let err = q
        .scaled_dot_product_attention(&k, &k, &AttentionOptions::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("[..b, S, E]"), "{err}");
    let mask = Tensor::<Cpu>::ones([4, 4], DType::F32, &dev).unwrap();
    let err = q
        .scaled_dot_product_attention(&q, &q, &AttentionOptions::new().mask(&mask))
        .unwrap_err();
    assert!(err.to_string().contains("broadcast"), "{err}");
    let ints = Tensor::<Cpu>::ones([2, 3, 4], DType::I64, &dev).unwrap();
    assert!(ints
        .scaled_dot_product_attention(&ints, &ints, &AttentionOptions::new())
        .is_err());
    let dropout = AttentionDropout {
        p: 1.0,
        seed: 0,
        offset: 0,
    };
    let err = q
        .scaled_dot_product_attention(&q, &q, &AttentionOptions::new().dropout(dropout))
        .unwrap_err();
    assert!(err.to_string().contains("[0, 1)"), "{err}");
}
