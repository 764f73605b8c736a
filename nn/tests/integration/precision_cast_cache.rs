//! `CastCache`: 16-bit decoding with f32 weights casts each parameter once inside the scope,
//! with the same bits as casting on every call; a parameter assigned a new value is cast
//! again; with gradients on, the casts stay differentiable; the cache empties with its last
//! guard.

use tessera_autograd::{no_grad, Var};
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::LinearConfig;
use tessera_nn::llama::{Llama, LlamaCache, LlamaConfig};
use tessera_nn::precision::{CastCache, Precision};
use tessera_nn::{Forward, Module};

/// A Llama with f32 weights computing its products in bf16.
fn llama(dev: &Cpu) -> Llama<Cpu> {
    LlamaConfig::new(40, 32, 48, 2, 4, 2, 32)
        .precision(Precision::BF16)
        .init(dev, &mut Generator::new(3))
        .unwrap()
}

/// Cached decoding of fixed ids, one at a time after a prompt: every step's logits bits.
fn decode(model: &Llama<Cpu>, dev: &Cpu) -> Vec<u32> {
    let mut cache = LlamaCache::new(model.config(), 1, dev).unwrap();
    let mut out = Vec::new();
    let prompt = Tensor::from_vec(vec![1i64, 5, 9, 2], [1, 4], dev).unwrap();
    let logits = model.forward_cached(&prompt, &mut cache).unwrap();
    out.extend(
        logits
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f32::to_bits),
    );
    for id in [7i64, 3, 30, 11, 0, 39] {
        let token = Tensor::from_vec(vec![id], [1, 1], dev).unwrap();
        let logits = model.forward_cached(&token, &mut cache).unwrap();
        out.extend(
            logits
                .to_vec::<f32>()
                .unwrap()
                .into_iter()
                .map(f32::to_bits),
        );
    }
    out
}

#[test]
fn decoding_in_a_cast_cache_gives_the_same_bits_and_casts_each_weight_once() {
    let dev = Cpu::new();
    let model = llama(&dev);
    let plain = decode(&model, &dev);
    // The matrices the products read: 4 projections and 3 MLP weights per layer, the head.
    let matrices = model
        .parameters()
        .iter()
        .filter(|(n, v)| v.rank() == 2 && !n.contains("embed_tokens"))
        .count();
    assert_eq!(matrices, 2 * 7 + 1);
    {
        let _cache = CastCache::enable();
        assert!(CastCache::is_enabled());
        let cached = decode(&model, &dev);
        assert!(cached == plain, "the cached casts changed the logits");
        // One cast per matrix (none per activation or token), the same after decoding again.
        assert_eq!(CastCache::len(), matrices);
        let _nested = CastCache::enable();
        assert!(decode(&model, &dev) == plain);
        assert_eq!(CastCache::len(), matrices);
    }
    assert!(!CastCache::is_enabled());
    assert_eq!(CastCache::len(), 0);
}

#[test]
fn an_assigned_parameter_is_cast_again_and_gradients_still_flow() {
    let dev = Cpu::new();
    let layer = LinearConfig::new(6, 5)
        .precision(Precision::BF16)
        .init(&dev, &mut Generator::new(1))
        .unwrap();
    let x = Var::constant(Tensor::randn([3, 6], DType::F32, 2, &dev).unwrap());
    let forward = || {
        no_grad(|| layer.forward(&x))
            .unwrap()
            .value()
            .to_vec::<f32>()
            .unwrap()
    };
    let _cache = CastCache::enable();
    let before = forward();
    assert_eq!(CastCache::len(), 2, "the weight and the bias");
    // An optimizer step's assignment: the next call sees the new weight.
    let doubled = layer.weight().value().mul_scalar(2.0).unwrap();
    layer.weight().set_value(doubled).unwrap();
    let after = forward();
    assert_ne!(after, before, "a stale cast of the old weight");
    let cache_off_result = {
        // The same computation without the cache, in another thread (the cache is per thread).
        let layer = layer.clone();
        let x = x.clone();
        std::thread::spawn(move || {
            no_grad(|| layer.forward(&x))
                .unwrap()
                .value()
                .to_vec::<f32>()
                .unwrap()
        })
        .join()
        .unwrap()
    };
    assert_eq!(after, cache_off_result);
    // With gradients on, the cast is the differentiable one: the weight gets its gradient.
    layer
        .forward(&x)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    let grad = layer.weight().grad().expect("a gradient for the weight");
    assert_eq!(grad.dtype(), DType::F32);
    assert!(grad.to_vec::<f32>().unwrap().iter().any(|g| *g != 0.0));
}
