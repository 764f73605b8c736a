//! Conv2d, multi-head attention and the GPT under a 16-bit precision policy: the forward pass
//! and the gradients (of the inputs and of every parameter) agree with the same model computed
//! in f64 within a tolerance set by the 16-bit format's unit roundoff, are measurably less
//! exact than f32 (so the 16-bit path really ran), and the parameters and their gradients stay
//! f32.

use tessera_autograd::Var;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::gpt::{GptCache, GptConfig};
use tessera_nn::layers::{Conv2dConfig, MultiHeadAttentionConfig, TransformerBlockConfig};
use tessera_nn::models::{ModelKind, ReferenceModel};
use tessera_nn::precision::Precision;
use tessera_nn::{Forward, Module, ToBackend};

fn dev() -> Cpu {
    Cpu::new()
}

/// The unit roundoff of the format a policy computes in (half an ulp at 1).
fn unit_roundoff(p: Precision) -> f64 {
    match p {
        Precision::BF16 => 2f64.powi(-8),
        Precision::F16 => 2f64.powi(-11),
        Precision::F32 => 2f64.powi(-24),
    }
}

/// Smooth pseudo-random values in about [-1, 1].
fn wave(n: usize, phase: f64) -> Vec<f64> {
    (0..n)
        .map(|i| (i as f64 * 0.7137 + phase).sin() * (i as f64 * 0.1931 + 2.0 * phase).cos())
        .collect()
}

fn tensor(values: &[f64], dims: &[usize], dtype: DType) -> Tensor<Cpu> {
    Tensor::from_vec(values.to_vec(), dims, &dev())
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
}

/// `max |a - b| / max |b|`.
fn relative_error(a: &Tensor<Cpu>, b: &Tensor<Cpu>) -> f64 {
    let (a, b) = (a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let diff = a
        .iter()
        .zip(&b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    assert!(scale > 0.0, "a reference of zeros tests nothing");
    diff / scale
}

/// Sets every parameter of `reference` (an f64 model) to the value of the same-named parameter
/// of `model`.
fn copy_parameters<M: Module<Cpu>>(model: &M, reference: &M) {
    let (from, to) = (model.parameters(), reference.parameters());
    assert_eq!(from.len(), to.len());
    for ((n1, v1), (n2, v2)) in from.iter().zip(&to) {
        assert_eq!(n1, n2);
        v2.set_value(v1.value().to_dtype(DType::F64).unwrap())
            .unwrap();
    }
}

/// The errors of one model against its f64 reference.
#[derive(Debug)]
struct Errors {
    output: f64,
    /// The largest relative error over the input's and every parameter's gradient.
    gradient: f64,
}

/// Runs `forward` on `model` (f32 parameters, input `x` in f32) and on `reference` (f64), then
/// backward of `sum(y · r)` for a fixed `r`, and compares; checks that the output and every
/// gradient of `model` are f32.
fn compare<M: Module<Cpu>>(
    model: &M,
    reference: &M,
    x: &[f64],
    dims: &[usize],
    forward: impl Fn(&M, &Var<Cpu>) -> Var<Cpu>,
) -> Errors {
    copy_parameters(model, reference);
    let run = |m: &M, dtype: DType| {
        let input = Var::param(tensor(x, dims, dtype));
        let y = forward(m, &input);
        assert_eq!(y.dtype(), dtype, "the output keeps the input's dtype");
        let r = tensor(&wave(y.numel(), 0.3), y.dims(), dtype);
        y.mul(&Var::constant(r))
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let mut grads = vec![input.grad().unwrap()];
        for (name, p) in m.parameters() {
            assert_eq!(p.dtype(), dtype, "{name} changed dtype");
            let g = p.grad().unwrap_or_else(|| panic!("{name} has no gradient"));
            assert_eq!(g.dtype(), dtype, "the gradient of {name}");
            grads.push(g);
        }
        (y.value(), grads)
    };
    let (y, grads) = run(model, DType::F32);
    let (y_ref, grads_ref) = run(reference, DType::F64);
    Errors {
        output: relative_error(&y, &y_ref),
        gradient: grads
            .iter()
            .zip(&grads_ref)
            .map(|(g, r)| relative_error(g, r))
            .fold(0.0, f64::max),
    }
}

/// Checks `errors` of a model under `p` against `roundings` unit roundoffs, and that the error
/// is above f32's level (the 16-bit path ran).
fn check(what: &str, p: Precision, errors: &Errors, roundings: f64) {
    let u = unit_roundoff(p);
    eprintln!("{what} {p}: {errors:?} (u = {u:e})");
    for (part, e) in [("output", errors.output), ("gradient", errors.gradient)] {
        assert!(
            e <= roundings * u,
            "{what} {p}: {part} error {e:e} above {roundings} u"
        );
        assert!(
            e >= u / 64.0,
            "{what} {p}: {part} error {e:e} is f32's: the policy was not applied"
        );
    }
}

/// The reference models under a 16-bit policy cast their input once and keep the activations
/// in the compute dtype through ReLU, pooling and flatten (as PyTorch's autocast): the logits
/// and every parameter's gradient are bit for bit those of the same layers casting back to
/// f32 after each layer (the layers' own rule), since ReLU, max pooling and flatten commute
/// with rounding.
#[test]
fn reference_models_keep_16_bit_activations_with_the_values_of_casting_after_each_layer() {
    let bits = |t: &Tensor<Cpu>| -> Vec<u64> {
        t.to_vec_f64()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    for kind in [ModelKind::Mlp, ModelKind::Cnn] {
        for p in [Precision::BF16, Precision::F16] {
            let build = || kind.build_with_precision(DType::F32, p, 5, &dev()).unwrap();
            let (model, twin) = (build(), build());
            assert_eq!(model.precision(), p);
            let mut dims = vec![3];
            dims.extend(kind.sample_dims());
            let x = Var::constant(tensor(&wave(dims.iter().product(), 0.2), &dims, DType::F32));
            let run = |y: Var<Cpu>| {
                assert_eq!(y.dtype(), DType::F32, "the logits are cast back");
                let r = Var::constant(tensor(&wave(y.numel(), 0.9), y.dims(), DType::F32));
                y.mul(&r).unwrap().sum_all().unwrap().backward().unwrap();
                y.value()
            };
            let y = run(model.forward(&x).unwrap());
            // The inner `Sequential` on f32 input: each layer casts back to f32.
            let y_cast_per_layer = run(match &twin {
                ReferenceModel::Mlp(m) => m.forward(&x).unwrap(),
                ReferenceModel::Cnn(m) => m.forward(&x).unwrap(),
                ReferenceModel::Sharded(..) => unreachable!("not sharded"),
            });
            let case = format!("{kind:?} {p}");
            assert_eq!(bits(&y), bits(&y_cast_per_layer), "{case}: logits");
            for ((name, a), (_, b)) in model.parameters().iter().zip(&twin.parameters()) {
                let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
                assert_eq!(ga.dtype(), DType::F32, "{case}: {name}");
                assert_eq!(bits(&ga), bits(&gb), "{case}: gradient of {name}");
            }
        }
    }
}

#[test]
fn a_16_bit_conv2d_matches_f64_within_its_roundoff_and_keeps_f32_parameters() {
    let x = wave(2 * 3 * 7 * 6, 0.1);
    for p in [Precision::BF16, Precision::F16] {
        let config = Conv2dConfig::new(3, 4, (3, 2))
            .stride((2, 1))
            .padding((1, 1));
        let conv = config
            .precision(p)
            .init(&dev(), &mut Generator::new(1))
            .unwrap();
        assert_eq!(conv.precision(), p);
        let reference = config
            .dtype(DType::F64)
            .init(&dev(), &mut Generator::new(2))
            .unwrap();
        let errors = compare(&conv, &reference, &x, &[2, 3, 7, 6], |m, x| {
            m.forward(x).unwrap()
        });
        // Each of input, weight and bias is rounded once, the output once more (and, in the
        // backward pass, the incoming gradient and the result): a handful of roundings.
        check("Conv2d", p, &errors, 6.0);
    }
}

#[test]
fn a_16_bit_multi_head_attention_matches_f64_within_its_roundoff() {
    let (b, t, e) = (2, 5, 8);
    let x = wave(b * t * e, 0.7);
    // An additive float mask (in the input's dtype) follows the queries into 16 bits.
    let mask_values: Vec<f64> = (0..t * t)
        .map(|i| if i % 7 == 3 { -1e4 } else { 0.0 })
        .collect();
    for p in [Precision::BF16, Precision::F16] {
        let config = MultiHeadAttentionConfig::new(e, 2);
        let attn = config
            .precision(p)
            .init(&dev(), &mut Generator::new(3))
            .unwrap();
        assert_eq!((attn.precision(), attn.out_proj().precision()), (p, p));
        let reference = config
            .dtype(DType::F64)
            .init(&dev(), &mut Generator::new(4))
            .unwrap();
        let errors = compare(&attn, &reference, &x, &[b, t, e], |m, x| {
            let mask = tensor(&mask_values, &[t, t], x.dtype());
            m.forward_self(x, true, Some(&mask)).unwrap()
        });
        // Input, projection, queries/keys/values, the attention output and its saved
        // log-sum-exp, the output projection: each rounded once, several of them feeding
        // products; the gradients pass through as many roundings again.
        check("MultiHeadAttention", p, &errors, 12.0);

        // The separate query/key/value path follows the policy the same way.
        let cross = compare(&attn, &reference, &x, &[b, t, e], |m, x| {
            m.forward_qkv(x, x, x, false, None).unwrap()
        });
        check("MultiHeadAttention::forward_qkv", p, &cross, 12.0);
    }
}

#[test]
fn a_16_bit_transformer_block_matches_f64_within_its_roundoff() {
    let (b, t, e) = (2, 4, 8);
    let x = wave(b * t * e, 1.3);
    for p in [Precision::BF16, Precision::F16] {
        let config = TransformerBlockConfig::new(e, 2);
        let block = config
            .precision(p)
            .init(&dev(), &mut Generator::new(5))
            .unwrap();
        assert_eq!(block.mlp.c_fc.precision(), p);
        assert_eq!(block.mlp.c_proj.precision(), p);
        assert_eq!(block.attn.precision(), p);
        let reference = config
            .dtype(DType::F64)
            .init(&dev(), &mut Generator::new(6))
            .unwrap();
        let errors = compare(&block, &reference, &x, &[b, t, e], |m, x| {
            m.forward(x).unwrap()
        });
        check("TransformerBlock", p, &errors, 16.0);
    }
}

#[test]
fn a_16_bit_gpt_matches_f64_and_its_cached_decoding_matches_its_forward() {
    let ids: Vec<i64> = vec![1, 4, 2, 9, 0, 3, 3, 7];
    let idx = Tensor::from_vec(ids.clone(), [2, 4], &dev()).unwrap();
    let targets = Tensor::from_vec(
        ids.iter().map(|i| (i + 1) % 11).collect::<Vec<i64>>(),
        [2, 4],
        &dev(),
    )
    .unwrap();
    for p in [Precision::BF16, Precision::F16] {
        let config = GptConfig::new(2, 2, 16, 8, 11);
        let model = config
            .precision(p)
            .init(&dev(), &mut Generator::new(7))
            .unwrap();
        assert_eq!(model.lm_head().precision(), p);
        // Moving the model keeps the policy of every layer.
        let moved = model.to_backend(&dev()).unwrap();
        assert_eq!(moved.lm_head().precision(), p);
        assert_eq!(moved.transformer().h[1].attn.precision(), p);
        assert_eq!(moved.transformer().h[1].mlp.c_fc.precision(), p);
        let reference = config
            .dtype(DType::F64)
            .init(&dev(), &mut Generator::new(8))
            .unwrap();
        copy_parameters(&model, &reference);

        let logits = model.forward(&idx).unwrap();
        assert_eq!(logits.dtype(), DType::F32, "logits stay f32");
        let output = relative_error(&logits.value(), &reference.forward(&idx).unwrap().value());
        let loss = model.loss(&idx, &targets).unwrap();
        let loss_ref = reference.loss(&idx, &targets).unwrap();
        let (l, l_ref) = (
            loss.value().to_scalar_f64().unwrap(),
            loss_ref.value().to_scalar_f64().unwrap(),
        );
        loss.backward().unwrap();
        loss_ref.backward().unwrap();
        let mut gradient: f64 = 0.0;
        for ((name, v), (_, r)) in model.parameters().iter().zip(reference.parameters()) {
            assert_eq!(v.dtype(), DType::F32, "{name}");
            let g = v.grad().unwrap();
            assert_eq!(g.dtype(), DType::F32, "the gradient of {name}");
            gradient = gradient.max(relative_error(&g, &r.grad().unwrap()));
        }
        let u = unit_roundoff(p);
        eprintln!("Gpt {p}: output {output:e}, loss {l} vs {l_ref}, gradient {gradient:e}");
        // Two blocks and the head in 16 bits, the residual stream in f32.
        assert!(
            output <= 16.0 * u && output >= u / 64.0,
            "output error {output:e}"
        );
        assert!((l - l_ref).abs() <= 16.0 * u * l_ref, "loss {l} vs {l_ref}");
        assert!(
            gradient <= 32.0 * u && gradient >= u / 64.0,
            "gradient error {gradient:e}"
        );

        // Cached decoding keeps the keys and values in the compute dtype and agrees with the
        // full forward pass to the same tolerance, position by position.
        let mut cache = GptCache::new(model.config(), 2, &dev()).unwrap();
        assert_eq!(cache.layers()[0].dtype(), p.compute_dtype().unwrap());
        let full = logits.value();
        for pos in 0..4 {
            let token = idx.narrow(1, pos, 1).unwrap().contiguous().unwrap();
            let step = model.forward_cached(&token, &mut cache).unwrap();
            assert_eq!(step.dtype(), DType::F32);
            let want = full.narrow(1, pos, 1).unwrap();
            let e = relative_error(&step, &want);
            assert!(e <= 16.0 * u, "{p} position {pos}: {e:e}");
        }
    }
}

#[test]
fn gpt_configs_save_their_precision_and_refuse_unknown_ones() {
    for p in Precision::ALL {
        let config = GptConfig::new(1, 1, 4, 4, 5).precision(p);
        let json = config.to_json();
        assert_eq!(json["precision"], p.name());
        assert_eq!(GptConfig::from_json(&json).unwrap(), config);
    }
    // Written before the field existed: f32.
    let mut old = GptConfig::new(1, 1, 4, 4, 5).to_json();
    old.as_object_mut().unwrap().remove("precision");
    assert_eq!(
        GptConfig::from_json(&old).unwrap().precision,
        Precision::F32
    );
    old["precision"] = "fp8".into();
    let err = GptConfig::from_json(&old).unwrap_err().to_string();
    assert!(err.contains("fp8"), "{err}");
}
