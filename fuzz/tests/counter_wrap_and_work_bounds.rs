//! Random counters wrap modulo 2^64, and work and host allocations are bounded by the elements
//! of a call (docs/SOUNDNESS.md, "Random counters" and "Work bounds"), each on the CPU backend
//! and the example backend (the template vendors copy). The reproducers of tracker issue 22, as
//! regression tests:
//!
//! 1. a dropout counter near `u64::MAX` overflowed in the CPU attention kernel (a panic with
//!    overflow checks, a silent wrap without): counters now wrap modulo 2^64 by definition;
//! 2. a host allocation sized by a batch count of a tensor with no element aborted the process
//!    (`Vec::with_capacity(batch)` in the CPU attention kernel);
//! 3. a reduction over a broadcast view of 2^40 rows walked every row; a reduced axis of stride
//!    0 is now repeated in closed form.
//!
//! Like `bad_input_gets_a_typed_error.rs`, this binary limits its own address space to 4 GiB
//! first, so an allocation that should never be made fails (or aborts) the same way on every
//! machine.

use std::sync::Once;
use std::time::{Duration, Instant};
use tessera_autograd::Var;
use tessera_backend_example::ExampleBackend;
use tessera_core::random::sample_f32;
use tessera_core::AttentionInputs;
use tessera_core::{
    AttentionDropout, AttentionOptions, Backend, DType, Distribution, Generator, Tensor,
};
use tessera_cpu::Cpu;
use tessera_nn::layers::{MultiHeadAttentionConfig, TransformerBlockConfig};

static LIMIT: Once = Once::new();

/// Limits this process to 4 GiB of address space (once).
fn limit_memory() {
    LIMIT.call_once(|| fuzz::child::limit_memory(4096).expect("setrlimit"));
}

// ----- 1. dropout counters wrap modulo 2^64 -----

/// The reproducer (`q = randn([3, 7])`, `v = randn([3, 4])`, offset `u64::MAX - 3`) runs, and
/// the dropped weights are exactly those whose draw, at counter `offset + n` modulo 2^64, is
/// below `p`: q = k = 0 makes every weight `1/S`, and v = I shows each one in the output.
fn dropout_counters_wrap<B: Backend>(dev: &B) {
    let q = Tensor::randn([3, 7], DType::F32, 5, dev).unwrap();
    let v = Tensor::randn([3, 4], DType::F32, 6, dev).unwrap();
    let offset = u64::MAX - 3;
    let dropout = AttentionDropout {
        p: 0.5,
        seed: 1,
        offset,
    };
    let opts = AttentionOptions::new().dropout(dropout);
    let out = q.scaled_dot_product_attention(&q, &v, &opts).unwrap();
    assert_eq!(out.dims(), &[3, 4]);
    assert!(out.to_vec::<f32>().unwrap().iter().all(|x| x.is_finite()));

    // The mask, read off the output.
    let (l, s) = (4usize, 6usize);
    let zeros = Tensor::zeros([l, 2], DType::F32, dev).unwrap();
    let keys = Tensor::zeros([s, 2], DType::F32, dev).unwrap();
    let eye = Tensor::eye(s, DType::F32, dev).unwrap();
    for offset in [u64::MAX - 3, u64::MAX, u64::MAX - 30] {
        let opts = AttentionOptions::new().dropout(AttentionDropout {
            p: 0.5,
            seed: 9,
            offset,
        });
        let out = zeros
            .scaled_dot_product_attention(&keys, &eye, &opts)
            .unwrap();
        let got = out.to_vec::<f32>().unwrap();
        let uniform = Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        };
        assert_eq!(got.len(), l * s);
        let mut wrapped = 0;
        for (n, &weight) in got.iter().enumerate() {
            let counter = offset.wrapping_add(n as u64);
            wrapped += usize::from(counter < offset);
            let kept = sample_f32(uniform, 9, counter) >= 0.5;
            let expected = if kept { 2.0 / s as f32 } else { 0.0 };
            assert!(
                (weight - expected).abs() < 1e-6,
                "offset {offset}, weight {n}: got {weight}, expected {expected}"
            );
        }
        if offset > u64::MAX - 20 {
            assert!(wrapped > 0, "the case must cross 2^64");
        }
    }

    // The backward pass draws the same mask.
    let qv = Var::leaf(q.clone(), true);
    let vv = Var::leaf(v.clone(), true);
    let out = qv
        .scaled_dot_product_attention(&qv, &vv, &AttentionOptions::new().dropout(dropout))
        .unwrap();
    out.sum_all().unwrap().backward().unwrap();
    assert!(qv.grad().is_some() && vv.grad().is_some());
}

#[test]
fn dropout_counters_wrap_around_on_every_backend() {
    limit_memory();
    dropout_counters_wrap(&Cpu::new());
    dropout_counters_wrap(&ExampleBackend::new());
}

/// The backend kernel and the tensor-level composite (which draws through `Backend::random`)
/// agree near the end of the counter space.
#[test]
fn the_cpu_kernel_and_the_composite_agree_across_the_wrap() {
    limit_memory();
    let dev = Cpu::new();
    let q = Tensor::randn([2, 5, 3], DType::F64, 1, &dev).unwrap();
    let k = Tensor::randn([2, 6, 3], DType::F64, 2, &dev).unwrap();
    let v = Tensor::randn([2, 6, 4], DType::F64, 3, &dev).unwrap();
    let params = tessera_core::attention::AttentionParams {
        scale: 0.5,
        causal: false,
        dropout: Some(AttentionDropout {
            p: 0.3,
            seed: 4,
            offset: u64::MAX - 17,
        }),
    };
    let kernel = dev
        .scaled_dot_product_attention(
            AttentionInputs {
                q: &q,
                k: &k,
                v: &v,
                mask: None,
            },
            &params,
        )
        .unwrap();
    let composite = tessera_core::composite::scaled_dot_product_attention(
        AttentionInputs {
            q: &q,
            k: &k,
            v: &v,
            mask: None,
        },
        &params,
    )
    .unwrap();
    let (a, b) = (
        kernel.out.to_vec::<f64>().unwrap(),
        composite.out.to_vec::<f64>().unwrap(),
    );
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() < 1e-12, "{x} vs {y}");
    }
}

// ----- 2. no bookkeeping sized by the batch of an empty tensor -----

fn empty_attention_with_a_huge_batch<B: Backend>(dev: &B) {
    let dims = [1usize << 31, 2, 0, 1];
    let q = Tensor::zeros(dims, DType::F32, dev).unwrap();
    let out = q
        .scaled_dot_product_attention(&q, &q, &AttentionOptions::new())
        .unwrap();
    assert_eq!(out.dims(), &dims);
    let with_lse = q
        .scaled_dot_product_attention_with_lse(&q, &q, &AttentionOptions::new())
        .unwrap();
    let grads = with_lse
        .out
        .scaled_dot_product_attention_backward(&q, &q, &q, &AttentionOptions::new(), &with_lse)
        .unwrap();
    assert_eq!(grads.q.dims(), &dims);
    // No queries, but keys: the same through the backend method, and with E = Ev = 0.
    let k = Tensor::zeros([1usize << 31, 2, 3, 0], DType::F32, dev).unwrap();
    let q0 = Tensor::zeros([1usize << 31, 2, 0, 0], DType::F32, dev).unwrap();
    let out = q0
        .scaled_dot_product_attention(&k, &k, &AttentionOptions::new())
        .unwrap();
    assert_eq!(out.dims(), &[1 << 31, 2, 0, 0]);
}

#[test]
fn attention_over_no_element_allocates_nothing_per_batch() {
    limit_memory();
    empty_attention_with_a_huge_batch(&Cpu::new());
    empty_attention_with_a_huge_batch(&ExampleBackend::new());
}

fn empty_layers_with_a_huge_batch<B: Backend>(dev: &B) {
    let mut g = Generator::new(0);
    let e = 8;
    let x = Var::leaf(
        Tensor::randn([1usize << 31, 0, e], DType::F32, 0, dev).unwrap(),
        true,
    );
    let mha = MultiHeadAttentionConfig::new(e, 2)
        .init(dev, &mut g)
        .unwrap();
    let y = mha.forward_self(&x, true, None).unwrap();
    assert_eq!(y.value().dims(), &[1 << 31, 0, e]);
    y.sum_all().unwrap().backward().unwrap();
    let block = TransformerBlockConfig::new(e, 2).init(dev, &mut g).unwrap();
    let y = block.forward_masked(&x, true, None).unwrap();
    assert_eq!(y.value().dims(), &[1 << 31, 0, e]);
}

#[test]
fn attention_layers_over_no_element_allocate_nothing_per_batch() {
    limit_memory();
    empty_layers_with_a_huge_batch(&Cpu::new());
    empty_layers_with_a_huge_batch(&ExampleBackend::new());
}

/// Max pooling with padding over an empty batch of huge images: the first-tap table was sized
/// by the output's spatial size (2^48 entries), not by its (zero) elements.
fn empty_padded_pooling<B: Backend>(dev: &B) {
    let x = Tensor::zeros([0, 1, 1 << 24, 1 << 24], DType::F32, dev).unwrap();
    let params = tessera_core::Pool2dParams {
        kernel: (2, 2),
        stride: (1, 1),
        padding: (1, 1),
    };
    let (max, arg) = x.max_pool2d_with_indices(params).unwrap();
    assert_eq!(max.numel(), 0);
    assert_eq!(arg.numel(), 0);
}

#[test]
fn padded_pooling_over_no_element_allocates_nothing_per_position() {
    limit_memory();
    empty_padded_pooling(&Cpu::new());
    empty_padded_pooling(&ExampleBackend::new());
}

// ----- 3. reductions over broadcast axes take time in the stored elements, not the view's -----

fn reductions_over_broadcast_axes<B: Backend>(dev: &B) {
    let start = Instant::now();
    let rows = 1usize << 40;
    let base = Tensor::from_vec(vec![1.0f64, -1.0, 0.5], [1, 1, 3], dev).unwrap();
    let x = base.broadcast_to([rows, 1, 3]).unwrap();
    // The reproducer: prod and mean over the whole view, and over the broadcast axis.
    let prod = x.prod(&[0], false).unwrap().to_vec::<f64>().unwrap();
    // 1^n = 1, (-1)^(2^40) = 1 (even), 0.5^(2^40) underflows to 0.
    assert_eq!(prod, vec![1.0, 1.0, 0.0]);
    let prod_all = x.prod(&[], false).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(prod_all, vec![0.0]);
    let mean = x.mean(&[], false).unwrap().to_vec::<f64>().unwrap();
    assert!((mean[0] - 0.5 / 3.0).abs() < 1e-15, "{mean:?}");
    let mean0 = x.mean(&[0], true).unwrap();
    assert_eq!(mean0.dims(), &[1, 1, 3]);
    assert_eq!(mean0.to_vec::<f64>().unwrap(), vec![1.0, -1.0, 0.5]);
    let sum = x.sum(&[0, 2], false).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(sum, vec![0.5 * rows as f64]);
    let max = x.max(&[0], false).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(max, vec![1.0, -1.0, 0.5]);

    // An odd count keeps the sign of a negative product; f32 and the 16-bit formats too.
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        if !dev.supports_dtype(dtype) {
            continue;
        }
        let column = Tensor::from_vec(vec![-1.0f64, 2.0], [2, 1], dev)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let t = column.broadcast_to([2, 5]).unwrap();
        let p = t.prod(&[1], false).unwrap().to_dtype(DType::F64).unwrap();
        assert_eq!(p.to_vec::<f64>().unwrap(), vec![-1.0, 32.0], "{dtype}");
        let s = t.sum(&[1], false).unwrap().to_dtype(DType::F64).unwrap();
        assert_eq!(s.to_vec::<f64>().unwrap(), vec![-5.0, 10.0], "{dtype}");
        let big = column.broadcast_to([3, 2, 1 << 30]).unwrap();
        let m = big
            .mean(&[0, 2], false)
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap();
        assert_eq!(m.to_vec::<f64>().unwrap(), vec![-1.0, 2.0], "{dtype}");
    }

    // Bool sums count (through i64) without converting the broadcast rows.
    let bits = Tensor::from_vec(vec![1.0f64, 0.0, 1.0], [3], dev).unwrap();
    let bits = bits
        .ne_scalar(0.0)
        .unwrap()
        .broadcast_to([rows, 3])
        .unwrap();
    let counts = bits.sum(&[0], false).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(counts, vec![rows as i64, 0, rows as i64]);

    // Integers wrap: the sum of 2^62 threes is 3·2^62 modulo 2^64, and so are products.
    let three = Tensor::from_vec(vec![3i64], [1], dev).unwrap();
    let many = three.broadcast_to([1 << 62]).unwrap();
    let s = many.sum_all().unwrap().to_vec::<i64>().unwrap();
    assert_eq!(s, vec![3i64.wrapping_mul(1 << 62)]);
    let p = three
        .broadcast_to([1000])
        .unwrap()
        .prod(&[], false)
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    assert_eq!(p, vec![3i64.wrapping_pow(1000)]);
    // The closed form agrees with walking the view where walking is affordable.
    let walked = Tensor::from_vec(vec![0.1f64, 0.7, -0.3], [3, 1], dev)
        .unwrap()
        .broadcast_to([3, 1000])
        .unwrap();
    let fast = walked.sum(&[1], false).unwrap().to_vec::<f64>().unwrap();
    let slow = walked
        .contiguous()
        .unwrap()
        .sum(&[1], false)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    for (a, b) in fast.iter().zip(&slow) {
        assert!((a - b).abs() <= 1e-12 * b.abs(), "{a} vs {b}");
    }
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn reductions_over_broadcast_axes_are_closed_form_on_every_backend() {
    limit_memory();
    reductions_over_broadcast_axes(&Cpu::new());
    reductions_over_broadcast_axes(&ExampleBackend::new());
}
