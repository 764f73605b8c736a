//! `MultiHeadAttention` and `TransformerBlock`: PyTorch's parameter names and layout, the
//! forward pass against the attention written out with matmul and softmax, cross-attention
//! through the three thirds of the projection, and cached (incremental) self-attention against
//! the full causal pass, including several positions after a non-empty cache.

use tessera_autograd::{no_grad, Var};
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{
    KvCache, MultiHeadAttention, MultiHeadAttentionConfig, TransformerBlockConfig,
};
use tessera_nn::{Forward, Module};

fn dev() -> Cpu {
    Cpu::new()
}

fn close(a: &Tensor<Cpu>, b: &Tensor<Cpu>, tol: f64, what: &str) {
    assert_eq!(a.dims(), b.dims(), "{what}: shapes");
    let (a, b) = (a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{what} [{i}]: {x} vs {y}"
        );
    }
}

fn attention(e: usize, h: usize, dtype: DType) -> MultiHeadAttention<Cpu> {
    MultiHeadAttentionConfig::new(e, h)
        .dtype(dtype)
        .init(&dev(), &mut Generator::new(3))
        .unwrap()
}

#[test]
fn parameters_have_pytorchs_names_and_layout() {
    let attn = attention(12, 3, DType::F32);
    let shapes: Vec<(String, Vec<usize>)> = attn
        .parameters()
        .into_iter()
        .map(|(n, v)| (n, v.dims().to_vec()))
        .collect();
    assert_eq!(
        shapes,
        [
            ("in_proj_weight".to_string(), vec![36, 12]),
            ("in_proj_bias".to_string(), vec![36]),
            ("out_proj.weight".to_string(), vec![12, 12]),
            ("out_proj.bias".to_string(), vec![12]),
        ]
    );
    // PyTorch's initialisation: Xavier-uniform bound √(6 / (12 + 36)), zero biases.
    let w = attn.in_proj_weight().value().to_vec_f64().unwrap();
    let bound = (6.0f64 / 48.0).sqrt();
    assert!(w.iter().all(|x| x.abs() <= bound));
    assert!(w.iter().any(|x| x.abs() > 0.5 * bound));
    let b = attn.in_proj_bias().unwrap().value().to_vec_f64().unwrap();
    assert!(b.iter().all(|&x| x == 0.0));
    let no_bias = MultiHeadAttentionConfig::new(8, 2)
        .bias(false)
        .init(&dev(), &mut Generator::new(0))
        .unwrap();
    assert_eq!(no_bias.parameters().len(), 2);
    assert!(MultiHeadAttentionConfig::new(10, 3)
        .init::<Cpu>(&dev(), &mut Generator::new(0))
        .is_err());
}

/// The layer written out: per head, softmax(q kᵀ / √d + mask) v, then the output projection.
fn by_hand(attn: &MultiHeadAttention<Cpu>, x: &Tensor<Cpu>, causal: bool) -> Tensor<Cpu> {
    let (b, t, e) = (x.dims()[0], x.dims()[1], x.dims()[2]);
    let (h, d) = (attn.num_heads(), attn.head_dim());
    let w = attn.in_proj_weight().value();
    let bias = attn.in_proj_bias().unwrap().value();
    let qkv = x.matmul(&w.t().unwrap()).unwrap().add(&bias).unwrap();
    let split = |i: usize| {
        qkv.narrow(2, i * e, e)
            .unwrap()
            .reshape([b, t, h, d])
            .unwrap()
            .permute(&[0, 2, 1, 3])
            .unwrap()
    };
    let (q, k, v) = (split(0), split(1), split(2));
    let mut s = q
        .matmul(&k.transpose(-2, -1).unwrap())
        .unwrap()
        .div_scalar((d as f64).sqrt())
        .unwrap();
    if causal {
        let mut bits = vec![0.0; t * t];
        for i in 0..t {
            for j in i + 1..t {
                bits[i * t + j] = f64::NEG_INFINITY;
            }
        }
        let m = Tensor::from_vec(bits, [t, t], &dev())
            .unwrap()
            .to_dtype(x.dtype())
            .unwrap();
        s = s.add(&m).unwrap();
    }
    let y = s.softmax(-1).unwrap().matmul(&v).unwrap();
    let merged = y
        .permute(&[0, 2, 1, 3])
        .unwrap()
        .reshape([b, t, e])
        .unwrap();
    let out = attn.out_proj();
    merged
        .matmul(&out.weight().value().t().unwrap())
        .unwrap()
        .add(&out.bias().unwrap().value())
        .unwrap()
}

#[test]
fn self_attention_matches_the_definition() {
    for dtype in [DType::F32, DType::F64] {
        let attn = attention(16, 4, dtype);
        let x = Tensor::randn([2, 7, 16], dtype, 1, &dev()).unwrap();
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
        for causal in [false, true] {
            let got = attn
                .forward_self(&Var::constant(x.clone()), causal, None)
                .unwrap();
            close(
                &got.value(),
                &by_hand(&attn, &x, causal),
                tol,
                "forward_self",
            );
        }
        // Cross-attention through the three thirds of the projection equals self-attention
        // when query, key and value are the same input.
        let xv = Var::constant(x.clone());
        let cross = attn.forward_qkv(&xv, &xv, &xv, true, None).unwrap();
        close(
            &cross.value(),
            &by_hand(&attn, &x, true),
            tol,
            "forward_qkv",
        );
    }
}

#[test]
fn a_key_padding_mask_hides_the_padded_keys() {
    let attn = attention(8, 2, DType::F64);
    let x = Tensor::randn([2, 5, 8], DType::F64, 4, &dev()).unwrap();
    // Batch element 0 has 3 real tokens: its first 3 outputs must not see tokens 3 and 4.
    let keep = Tensor::from_vec(vec![1i64, 1, 1, 0, 0, 1, 1, 1, 1, 1], [2, 5], &dev()).unwrap();
    let mask = MultiHeadAttention::key_padding_mask(&keep).unwrap();
    let padded = attn
        .forward_self(&Var::constant(x.clone()), true, Some(&mask))
        .unwrap();
    let short = x.narrow(0, 0, 1).unwrap().narrow(1, 0, 3).unwrap();
    let alone = attn
        .forward_self(&Var::constant(short), true, None)
        .unwrap();
    let head = padded
        .value()
        .narrow(0, 0, 1)
        .unwrap()
        .narrow(1, 0, 3)
        .unwrap();
    close(&head, &alone.value(), 1e-12, "padding");
}

#[test]
fn gradients_reach_every_parameter() {
    let attn = MultiHeadAttentionConfig::new(8, 2)
        .dropout(0.2)
        .dtype(DType::F64)
        .init(&dev(), &mut Generator::new(1))
        .unwrap();
    let x = Var::param(Tensor::randn([2, 4, 8], DType::F64, 2, &dev()).unwrap());
    attn.forward_self(&x, true, None)
        .unwrap()
        .square()
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    for (name, p) in attn.parameters() {
        let g = p.grad().unwrap_or_else(|| panic!("{name} has no gradient"));
        assert!(g.to_vec_f64().unwrap().iter().any(|&v| v != 0.0), "{name}");
    }
    assert!(x.grad().is_some());
}

#[test]
fn cached_self_attention_equals_the_full_causal_pass() {
    let attn = attention(12, 3, DType::F64);
    let x = Tensor::randn([2, 9, 12], DType::F64, 5, &dev()).unwrap();
    let full = no_grad(|| attn.forward_self(&Var::constant(x.clone()), true, None))
        .unwrap()
        .value();
    let mut cache = KvCache::new(2, 3, 16, 4, DType::F64, &dev()).unwrap();
    // A prompt of 4, one token, then a chunk of 3 after a non-empty cache, then one more.
    let mut parts = Vec::new();
    for (start, len) in [(0, 4), (4, 1), (5, 3), (8, 1)] {
        let chunk = Var::constant(x.narrow(1, start, len).unwrap());
        parts.push(attn.forward_cached(&chunk, &mut cache).unwrap().value());
    }
    assert_eq!(cache.len(), 9);
    let joined = Tensor::cat(&parts.iter().collect::<Vec<_>>(), 1).unwrap();
    close(&joined, &full, 1e-12, "cached");
    // A full cache refuses more positions.
    let mut small = KvCache::new(2, 3, 4, 4, DType::F64, &dev()).unwrap();
    attn.forward_cached(&Var::constant(x.narrow(1, 0, 4).unwrap()), &mut small)
        .unwrap();
    let err = attn
        .forward_cached(&Var::constant(x.narrow(1, 4, 1).unwrap()), &mut small)
        .unwrap_err();
    assert!(err.to_string().contains("capacity"), "{err}");
}

#[test]
fn transformer_block_names_and_causality() {
    let block = TransformerBlockConfig::new(8, 2)
        .dtype(DType::F64)
        .init(&dev(), &mut Generator::new(0))
        .unwrap();
    let names: Vec<String> = block.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "ln_1.weight",
            "ln_1.bias",
            "attn.in_proj_weight",
            "attn.in_proj_bias",
            "attn.out_proj.weight",
            "attn.out_proj.bias",
            "ln_2.weight",
            "ln_2.bias",
            "mlp.c_fc.weight",
            "mlp.c_fc.bias",
            "mlp.c_proj.weight",
            "mlp.c_proj.bias",
        ]
    );
    // Causal: changing the last position leaves the outputs of the earlier ones unchanged.
    let x = Tensor::randn([1, 5, 8], DType::F64, 1, &dev()).unwrap();
    let changed = x
        .narrow_assign(
            1,
            4,
            &Tensor::randn([1, 1, 8], DType::F64, 2, &dev()).unwrap(),
            false,
        )
        .unwrap();
    let a = block.forward(&Var::constant(x)).unwrap().value();
    let b = block.forward(&Var::constant(changed)).unwrap().value();
    close(
        &a.narrow(1, 0, 4).unwrap(),
        &b.narrow(1, 0, 4).unwrap(),
        1e-12,
        "causal",
    );
    let diff = a
        .narrow(1, 4, 1)
        .unwrap()
        .sub(&b.narrow(1, 4, 1).unwrap())
        .unwrap();
    assert!(
        diff.abs()
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar_f64()
            .unwrap()
            > 1e-6
    );
}
