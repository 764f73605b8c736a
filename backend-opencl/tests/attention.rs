//! Attention on the default OpenCL device, on each route of the GPU engine (the default, the
//! fused kernels of `attention.cl.c`, and the materialised composite cut into one chunk per
//! sequence, each chunk's dropout counters included): the conformance checks of both passes
//! (random shapes, masks, dropout, head splits) on every float dtype the device supports, and
//! a training-sized problem against the CPU backend. Skips with a printed reason when no OpenCL
//! device exists.

mod common;

use tessera_conformance::checks::attention::{self, AttentionOp};
use tessera_core::{AttentionDropout, AttentionOptions, Backend, DType, Tensor};
use tessera_cpu::Cpu;
use tessera_opencl::{AttentionRoute, OpenCl};

/// The routes every test below runs on, whatever `TESSERA_GPU_ATTENTION` says.
fn routes(dev: &OpenCl) -> [(&'static str, OpenCl); 3] {
    [
        ("auto", dev.with_attention(AttentionRoute::Auto)),
        ("fused", dev.with_attention(AttentionRoute::Fused)),
        (
            "materialized, one sequence per chunk",
            dev.with_attention(AttentionRoute::Materialized { chunk_scores: 1 }),
        ),
    ]
}

#[test]
fn attention_conformance() {
    let dev = device_or_skip!();
    for (route, dev) in routes(&dev) {
        eprintln!("attention on the {route} route");
        for op in AttentionOp::ALL {
            for dtype in [DType::F32, DType::F64] {
                if dev.supports_dtype(dtype) {
                    attention::run(&dev, op, dtype);
                }
            }
        }
    }
}

/// A GPT-sized head split (several chunks of keys per work-group of the fused kernels; several
/// chunks of sequences on the materialised route), causal with dropout, both passes against
/// the CPU backend.
#[test]
fn a_causal_head_split_matches_the_cpu() {
    let dev = device_or_skip!();
    for (route, dev) in routes(&dev) {
        eprintln!("head split on the {route} route");
        causal_head_split_matches_the_cpu(&dev);
    }
}

fn causal_head_split_matches_the_cpu(dev: &OpenCl) {
    let cpu = Cpu::new();
    let (b, t, h, d) = (2, 300, 2, 16);
    let x = Tensor::randn([b, t, 3 * h * d], DType::F32, 5, &cpu).unwrap();
    let g = Tensor::randn([b, h, t, d], DType::F32, 6, &cpu).unwrap();
    let dropout = AttentionDropout {
        p: 0.1,
        seed: 9,
        offset: 0,
    };
    let options = AttentionOptions::new().causal(true).dropout(dropout);
    let heads = |x: &Tensor<OpenCl>| {
        (0..3)
            .map(|i| {
                x.narrow(2, i * h * d, h * d)
                    .unwrap()
                    .reshape([b, t, h, d])
                    .unwrap()
                    .permute(&[0, 2, 1, 3])
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    let heads_cpu = |x: &Tensor<Cpu>| {
        (0..3)
            .map(|i| {
                x.narrow(2, i * h * d, h * d)
                    .unwrap()
                    .reshape([b, t, h, d])
                    .unwrap()
                    .permute(&[0, 2, 1, 3])
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    let c = heads_cpu(&x);
    let want = c[0]
        .scaled_dot_product_attention_with_lse(&c[1], &c[2], &options)
        .unwrap();
    let want_grads = g
        .scaled_dot_product_attention_backward(&c[0], &c[1], &c[2], &options, &want)
        .unwrap();
    let xo = x.to_backend(dev).unwrap();
    let go = g.to_backend(dev).unwrap();
    let o = heads(&xo);
    let opts = AttentionOptions::new().causal(true).dropout(dropout);
    let got = o[0]
        .scaled_dot_product_attention_with_lse(&o[1], &o[2], &opts)
        .unwrap();
    let got_grads = go
        .scaled_dot_product_attention_backward(&o[0], &o[1], &o[2], &opts, &got)
        .unwrap();
    let close = |a: &Tensor<OpenCl>, b: &Tensor<Cpu>, what: &str| {
        let (a, b) = (a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                "{what} [{i}]: {x} vs {y}"
            );
        }
    };
    close(&got.out, &want.out, "out");
    close(&got.logsumexp, &want.logsumexp, "logsumexp");
    close(&got_grads.q, &want_grads.q, "dq");
    close(&got_grads.k, &want_grads.k, "dk");
    close(&got_grads.v, &want_grads.v, "dv");
}

/// 16-bit attention gradients within one ulp of the exact values (issue 22), on the systematic
/// set the CPU backend's test measures too.
#[test]
fn sixteen_bit_attention_gradients_are_within_one_ulp() {
    use tessera_conformance::checks::attention_accuracy::check_systematic_set;
    let dev = device_or_skip!();
    for dtype in [DType::F16, DType::BF16] {
        if !dev.supports_dtype(dtype) {
            println!("skipped {dtype}: not supported by this device");
            continue;
        }
        if let Err(e) = check_systematic_set(&dev, dtype) {
            panic!("{e}");
        }
    }
}
