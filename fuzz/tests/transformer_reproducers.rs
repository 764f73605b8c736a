//! What the fuzzer found in issue 14's API when it joined the table (fuzz/src/ops/transformer.rs),
//! each as a regression test: typed errors, never a panic or a silently wrong result.

use tessera_backend_example::ExampleBackend;
use tessera_core::attention::AttentionParams;
use tessera_core::AttentionInputs;
use tessera_core::{composite, AttentionDropout, Backend, DType, Error, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::data::{SplitMix64, TokenWindows};
use tessera_nn::gpt::GptConfig;
use tessera_nn::layers::TransformerBlockConfig;

fn ones<B: Backend>(dims: &[usize], dev: &B) -> Tensor<B> {
    Tensor::ones(dims.to_vec(), DType::F32, dev).expect("small tensor")
}

fn params() -> AttentionParams {
    AttentionParams {
        scale: 1.0,
        causal: false,
        dropout: None,
    }
}

fn is_invalid<T>(r: tessera_core::Result<T>) -> bool {
    matches!(r, Err(Error::InvalidArgument { .. }))
}

/// The `Backend` method is public: called directly with operands `Tensor` would reject, the
/// CPU kernel indexed out of bounds (it trusted the shapes). Every backend and the composite
/// now check them.
fn backend_attention_checks_its_operands<B: Backend>(dev: &B) {
    let p = params();
    let (q, k, v) = (ones(&[2, 3], dev), ones(&[4, 3], dev), ones(&[4, 2], dev));
    assert!(dev
        .scaled_dot_product_attention(
            AttentionInputs {
                q: &q,
                k: &k,
                v: &v,
                mask: None
            },
            &p
        )
        .is_ok());
    // Keys and values of different lengths; a width mismatch; rank 1; different batches.
    let short_v = ones(&[1, 2], dev);
    assert!(is_invalid(dev.scaled_dot_product_attention(
        AttentionInputs {
            q: &q,
            k: &k,
            v: &short_v,
            mask: None
        },
        &p
    )));
    let narrow_k = ones(&[4, 2], dev);
    assert!(is_invalid(dev.scaled_dot_product_attention(
        AttentionInputs {
            q: &q,
            k: &narrow_k,
            v: &v,
            mask: None
        },
        &p
    )));
    let flat = ones(&[3], dev);
    assert!(is_invalid(dev.scaled_dot_product_attention(
        AttentionInputs {
            q: &flat,
            k: &flat,
            v: &flat,
            mask: None
        },
        &p
    )));
    let batched_q = ones(&[2, 2, 3], dev);
    let batched_k = ones(&[3, 4, 3], dev);
    let batched_v = ones(&[3, 4, 2], dev);
    assert!(is_invalid(dev.scaled_dot_product_attention(
        AttentionInputs {
            q: &batched_q,
            k: &batched_k,
            v: &batched_v,
            mask: None
        },
        &p
    )));
    // A mask that is not exactly [L, S] (a backend receives it broadcast).
    let mask = ones(&[2, 1], dev);
    assert!(is_invalid(dev.scaled_dot_product_attention(
        AttentionInputs {
            q: &q,
            k: &k,
            v: &v,
            mask: Some(&mask)
        },
        &p
    )));
    // Parameters Tensor never builds.
    for bad in [
        AttentionParams {
            scale: f64::NAN,
            ..p
        },
        AttentionParams {
            dropout: Some(AttentionDropout {
                p: f64::INFINITY,
                seed: 0,
                offset: 0,
            }),
            ..p
        },
    ] {
        assert!(is_invalid(dev.scaled_dot_product_attention(
            AttentionInputs {
                q: &q,
                k: &k,
                v: &v,
                mask: None
            },
            &bad
        )));
        assert!(is_invalid(composite::scaled_dot_product_attention(
            AttentionInputs {
                q: &q,
                k: &k,
                v: &v,
                mask: None
            },
            &bad
        )));
    }
    // The backward pass with a gradient or saved output of the wrong shape.
    let forward = dev
        .scaled_dot_product_attention(
            AttentionInputs {
                q: &q,
                k: &k,
                v: &v,
                mask: None,
            },
            &p,
        )
        .unwrap();
    let good_grad = ones(&[2, 2], dev);
    assert!(dev
        .scaled_dot_product_attention_backward(
            &good_grad,
            AttentionInputs {
                q: &q,
                k: &k,
                v: &v,
                mask: None
            },
            &forward,
            &p
        )
        .is_ok());
    let bad_grad = ones(&[2, 3], dev);
    assert!(is_invalid(dev.scaled_dot_product_attention_backward(
        &bad_grad,
        AttentionInputs {
            q: &q,
            k: &k,
            v: &v,
            mask: None
        },
        &forward,
        &p
    )));
    let other = dev
        .scaled_dot_product_attention(
            AttentionInputs {
                q: &ones(&[5, 3], dev),
                k: &k,
                v: &v,
                mask: None,
            },
            &p,
        )
        .unwrap();
    assert!(is_invalid(dev.scaled_dot_product_attention_backward(
        &good_grad,
        AttentionInputs {
            q: &q,
            k: &k,
            v: &v,
            mask: None
        },
        &other,
        &p
    )));
}

#[test]
fn backend_attention_checks_its_operands_on_every_backend() {
    backend_attention_checks_its_operands(&Cpu::new());
    backend_attention_checks_its_operands(&ExampleBackend::new());
}

#[test]
fn token_windows_reject_what_they_cannot_hold() {
    // Token ids above 32 bits were truncated silently.
    let big = u32::MAX as usize + 1;
    let err = TokenWindows::new(&[1, 2, big, 3], 2).unwrap_err();
    assert!(err.to_string().contains("32 bits"), "{err}");
    let w = TokenWindows::new(&[1, 2, 3, 4, 5], 2).unwrap();
    let mut rng = SplitMix64::new(0);
    // A batch whose starts cannot be allocated aborted ("capacity overflow").
    let huge = w.random_batch(usize::MAX / 2, &mut rng, &Cpu::new());
    assert!(
        matches!(
            huge,
            Err(Error::OutOfMemory { .. } | Error::SizeOverflow { .. })
        ),
        "{huge:?}"
    );
    // A start past the end (with an overflowing end) is an error.
    assert!(w.batch_at(&[usize::MAX], &Cpu::new()).is_err());
    let (x, y) = w.batch_at(&[0, 2], &Cpu::new()).unwrap();
    assert_eq!(x.to_vec::<i64>().unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![2, 3, 4, 5]);
    // Splitting with a block size whose double overflows.
    assert!(TokenWindows::split(&[1, 2, 3], usize::MAX, 4, 2).is_err());
}

#[test]
fn transformer_sizes_that_overflow_are_size_errors() {
    let dev = Cpu::new();
    let mut g = Generator::new(0);
    let block = TransformerBlockConfig::new(8, 2)
        .mlp_ratio(usize::MAX)
        .init(&dev, &mut g);
    assert!(
        matches!(block, Err(Error::SizeOverflow { .. })),
        "{:?}",
        block.err()
    );
    let config = GptConfig::new(1 << 40, 1, 1 << 32, 4, 4);
    assert!(matches!(config.validate(), Err(Error::SizeOverflow { .. })));
    assert_eq!(config.num_parameters(), usize::MAX);
}

#[test]
fn attention_layer_and_gpt_sizes_beyond_memory_are_errors() {
    use tessera_nn::layers::MultiHeadAttentionConfig;
    let dev = Cpu::new();
    let mut g = Generator::new(0);
    // 3 * embed_dim overflowed (a panic with overflow checks, a wrapped size without).
    let mha = MultiHeadAttentionConfig::new(isize::MAX as usize, 1).init(&dev, &mut g);
    assert!(
        matches!(mha, Err(Error::SizeOverflow { .. })),
        "{:?}",
        mha.err()
    );
    // 2^32 layers: the block list alone cannot be allocated (it aborted).
    let gpt = GptConfig::new(1 << 32, 1, 3, 10, 4).init(&dev, &mut g);
    assert!(
        matches!(gpt, Err(Error::OutOfMemory { .. })),
        "{:?}",
        gpt.err()
    );
}
