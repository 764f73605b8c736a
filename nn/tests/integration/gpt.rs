//! The GPT end to end on the CPU: nanoGPT's names and initialisation, the tied output head (one
//! Var under two names, listed once for optimizers, still tied after moving backends), cached
//! decoding equal to full re-computation token for token (past the block size too), a tiny
//! model overfitting a short text, and checkpoint folders.

use tessera_autograd::no_grad;
use tessera_backend_example::ExampleBackend;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::clip::clip_grad_norm;
use tessera_nn::data::{CharTokenizer, SplitMix64, TokenWindows};
use tessera_nn::gpt::{
    generate, generate_without_cache, load_checkpoint, save_checkpoint, GptCache, GptConfig,
    SamplingConfig,
};
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::{Module, ToBackend};

fn dev() -> Cpu {
    Cpu::new()
}

fn tiny(dtype: DType) -> GptConfig {
    GptConfig::new(2, 2, 16, 12, 11).dtype(dtype)
}

fn tokens(ids: &[i64]) -> Tensor<Cpu> {
    Tensor::from_vec(ids.to_vec(), [1, ids.len()], &dev()).unwrap()
}

#[test]
fn names_tying_and_initialisation() {
    let config = GptConfig::new(3, 2, 16, 8, 10);
    let model = config.init(&dev(), &mut Generator::new(0)).unwrap();
    let names: Vec<String> = model.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names[..4],
        [
            "transformer.wte.weight",
            "transformer.wpe.weight",
            "transformer.h.0.ln_1.weight",
            "transformer.h.0.ln_1.bias"
        ]
    );
    assert!(names.contains(&"transformer.h.2.attn.in_proj_weight".to_string()));
    assert_eq!(names.last().unwrap(), "transformer.ln_f.bias");
    // The head is listed once by parameters() and under both names by state_dict().
    let state = model.state_dict();
    assert_eq!(state.len(), names.len() + 1);
    assert!(state.contains_key("lm_head.weight"));
    assert_eq!(model.num_parameters(), config.num_parameters());
    let wte = model.transformer().wte.weight();
    assert_eq!(model.lm_head().weight().id(), wte.id());

    // nanoGPT's init: std 0.02, residual projections 0.02 / √(2·n_layer), zero biases.
    let std = |t: &Tensor<Cpu>| {
        let v = t.to_vec_f64().unwrap();
        (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64).sqrt()
    };
    let block = &model.transformer().h[0];
    assert!((std(&block.attn.in_proj_weight().value()) - 0.02).abs() < 0.002);
    let residual = 0.02 / 6f64.sqrt();
    assert!((std(&block.mlp.c_proj.weight().value()) - residual).abs() < 0.001);
    assert!((std(&block.attn.out_proj().weight().value()) - residual).abs() < 0.002);
    assert_eq!(std(&block.mlp.c_fc.bias().unwrap().value()), 0.0);
    assert_eq!(
        block.ln_1.weight().unwrap().value().to_vec_f64().unwrap(),
        vec![1.0; 16]
    );

    // Moving the model keeps the head tied.
    let moved = model.to_backend(&ExampleBackend::new()).unwrap();
    assert_eq!(
        moved.lm_head().weight().id(),
        moved.transformer().wte.weight().id()
    );
    assert_eq!(moved.state_dict().len(), state.len());
}

#[test]
fn a_tied_weight_is_updated_once_per_step() {
    let model = tiny(DType::F64)
        .init(&dev(), &mut Generator::new(1))
        .unwrap();
    let mut opt = AdamW::new(model.parameters(), AdamWConfig::new(1e-2)).unwrap();
    let x = tokens(&[1, 2, 3, 4]);
    let y = tokens(&[2, 3, 4, 5]);
    let before = model.lm_head().weight().value();
    model.loss(&x, &y).unwrap().backward().unwrap();
    // The gradient holds both uses (embedding lookup and output head).
    let g = model.transformer().wte.weight().grad().unwrap();
    assert!(g.to_vec_f64().unwrap().iter().all(|v| v.is_finite()));
    opt.step().unwrap();
    let after = model.lm_head().weight().value();
    // Adam's first step moves each element by at most lr (one update, not two).
    let moved = after
        .sub(&before)
        .unwrap()
        .abs()
        .unwrap()
        .max(&[], false)
        .unwrap();
    let largest = moved.to_scalar_f64().unwrap();
    assert!(largest <= 1.01e-2 && largest > 5e-3, "{largest}");
}

#[test]
fn cached_forward_equals_the_full_forward() {
    for dtype in [DType::F32, DType::F64] {
        let model = tiny(dtype).init(&dev(), &mut Generator::new(2)).unwrap();
        model.eval();
        let ids = [3i64, 1, 4, 1, 5, 9, 2, 6, 5, 3];
        let full = no_grad(|| model.forward(&tokens(&ids))).unwrap().value();
        let mut cache = GptCache::new(model.config(), 1, &dev()).unwrap();
        let mut parts = vec![model
            .forward_cached(&tokens(&ids[..4]), &mut cache)
            .unwrap()];
        for &t in &ids[4..] {
            parts.push(model.forward_cached(&tokens(&[t]), &mut cache).unwrap());
        }
        let joined = Tensor::cat(&parts.iter().collect::<Vec<_>>(), 1).unwrap();
        let (a, b) = (joined.to_vec_f64().unwrap(), full.to_vec_f64().unwrap());
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
        for (x, y) in a.iter().zip(&b) {
            assert!(
                (x - y).abs() <= tol * (1.0 + y.abs()),
                "{dtype}: {x} vs {y}"
            );
        }
    }
}

#[test]
fn kv_cache_generation_equals_full_recomputation_token_for_token() {
    let model = tiny(DType::F32)
        .init(&dev(), &mut Generator::new(3))
        .unwrap();
    for sampling in [
        SamplingConfig::new().temperature(0.0),
        SamplingConfig::new().temperature(1.0).seed(7),
        SamplingConfig::new()
            .temperature(0.8)
            .top_k(Some(4))
            .seed(8),
    ] {
        // 30 new tokens after a prompt of 5: the block of 12 overflows and is refilled 4 times.
        let prompt = [1, 2, 3, 4, 5];
        let cached = generate(
            &model,
            &prompt,
            30,
            &mut sampling.sampler().unwrap(),
            &mut |_| {},
        )
        .unwrap();
        let full =
            generate_without_cache(&model, &prompt, 30, &mut sampling.sampler().unwrap()).unwrap();
        assert_eq!(cached.tokens, full, "{sampling:?}");
        assert!(cached.context_refills >= 3, "{}", cached.context_refills);
        assert!(cached.first_token_s > 0.0 && cached.seconds >= cached.first_token_s);
    }
    // A prompt longer than the block keeps its last block_size tokens.
    let long: Vec<usize> = (0..20).map(|i| i % 11).collect();
    let s = SamplingConfig::new().temperature(0.0);
    let a = generate(&model, &long, 3, &mut s.sampler().unwrap(), &mut |_| {}).unwrap();
    let b = generate_without_cache(&model, &long, 3, &mut s.sampler().unwrap()).unwrap();
    assert_eq!(a.tokens, b);
    assert!(generate(&model, &[], 3, &mut s.sampler().unwrap(), &mut |_| {}).is_err());
    assert!(generate(&model, &[11], 3, &mut s.sampler().unwrap(), &mut |_| {}).is_err());
}

#[test]
fn a_tiny_gpt_overfits_a_short_text() {
    let text = "the quick brown fox jumps over the lazy dog. ";
    let tok = CharTokenizer::from_text(text);
    let ids = tok.encode(text).unwrap();
    let block = 16;
    let windows = TokenWindows::new(&ids, block).unwrap();
    let config = GptConfig::new(2, 2, 32, block, tok.vocab_size());
    let model = config.init(&dev(), &mut Generator::new(0)).unwrap();
    let mut opt = AdamW::new(model.parameters(), AdamWConfig::new(3e-3)).unwrap();
    let starts: Vec<usize> = (0..windows.count()).collect();
    let (x, y) = windows.batch_at(&starts, &dev()).unwrap();
    let mut loss = f64::INFINITY;
    for _ in 0..300 {
        opt.zero_grad();
        let l = model.loss(&x, &y).unwrap();
        l.backward().unwrap();
        let params: Vec<_> = model.parameters().into_iter().map(|(_, v)| v).collect();
        clip_grad_norm(&params, 1.0).unwrap();
        opt.step().unwrap();
        loss = l.value().to_scalar_f64().unwrap();
        if loss < 0.02 {
            break;
        }
    }
    assert!(loss < 0.05, "loss after training: {loss}");
    // And it reproduces the text greedily.
    let prompt = tok.encode("the quick").unwrap();
    let s = SamplingConfig::new().temperature(0.0);
    let out = generate(&model, &prompt, 10, &mut s.sampler().unwrap(), &mut |_| {}).unwrap();
    assert_eq!(tok.decode(&out.tokens).unwrap(), " brown fox");
}

#[test]
fn checkpoint_folders_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let tok = CharTokenizer::from_text("abcdefghijk");
    let model = tiny(DType::F32)
        .dropout(0.1)
        .init(&dev(), &mut Generator::new(4))
        .unwrap();
    save_checkpoint(dir.path(), &model, &tok, serde_json::json!({"steps": 3})).unwrap();
    let loaded = load_checkpoint(dir.path(), &dev()).unwrap();
    assert_eq!(loaded.tokenizer, tok);
    assert_eq!(loaded.model.config(), model.config());
    assert_eq!(loaded.info["training"]["steps"], 3);
    assert!(!loaded.model.is_training());
    model.eval();
    let x = tokens(&[1, 2, 3]);
    let a = no_grad(|| model.forward(&x))
        .unwrap()
        .value()
        .to_vec_f64()
        .unwrap();
    let b = no_grad(|| loaded.model.forward(&x))
        .unwrap()
        .value()
        .to_vec_f64()
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(
        loaded.model.lm_head().weight().id(),
        loaded.model.transformer().wte.weight().id()
    );
    // A vocabulary that does not fit the model is refused, a missing folder explained.
    let small = CharTokenizer::from_text("ab");
    assert!(save_checkpoint(dir.path(), &model, &small, serde_json::json!({})).is_err());
    let err = load_checkpoint(dir.path().join("nope"), &dev())
        .err()
        .unwrap();
    assert!(err.to_string().contains("config.json"), "{err}");
}

#[test]
fn configs_are_checked() {
    assert!(GptConfig::new(1, 3, 16, 8, 10).validate().is_err());
    assert!(GptConfig::new(1, 2, 16, 0, 10).validate().is_err());
    assert!(GptConfig::new(1, 2, 16, 8, 10)
        .dropout(1.0)
        .validate()
        .is_err());
    let model = tiny(DType::F32)
        .init(&dev(), &mut Generator::new(0))
        .unwrap();
    let too_long = Tensor::<Cpu>::zeros([1, 13], DType::I64, &dev()).unwrap();
    assert!(model
        .forward(&too_long)
        .unwrap_err()
        .to_string()
        .contains("block size"));
    let floats = Tensor::<Cpu>::zeros([1, 3], DType::F32, &dev()).unwrap();
    assert!(model.forward(&floats).is_err());
    let _ = SplitMix64::new(0);
}
