//! Scaled dot-product attention: gradients with respect to q, k and v through the CPU's fused
//! kernels, with and without causal masking, a random bool padding mask (fully masked rows
//! included) and dropout, on contiguous and non-contiguous inputs.

use crate::common::*;
use proptest::prelude::*;
use tessera_core::{AttentionDropout, AttentionOptions, HostData, Tensor};
use tessera_cpu::Cpu;

/// Batch dims, L, S, E, Ev.
fn sizes() -> impl Strategy<Value = (Vec<usize>, usize, usize, usize, usize)> {
    (
        prop::collection::vec(1usize..=2, 0..=2),
        1usize..=4,
        1usize..=4,
        1usize..=3,
        1usize..=3,
    )
}

fn with(batch: &[usize], rows: usize, cols: usize) -> Vec<usize> {
    let mut d = batch.to_vec();
    d.extend([rows, cols]);
    d
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn attention(
        (q, k, v, causal, mask, dropout) in sizes().prop_flat_map(|(b, l, s, e, ev)| {
            let mask_len: usize = b.iter().product::<usize>() * l * s;
            (
                input_with(with(&b, l, e), uniform(-1.5, 1.5)),
                input_with(with(&b, s, e), uniform(-1.5, 1.5)),
                input_with(with(&b, s, ev), uniform(-1.5, 1.5)),
                any::<bool>(),
                prop::option::of(prop::collection::vec(prop::bool::weighted(0.8), mask_len)),
                any::<bool>(),
            )
        })
    ) {
        let mask = mask.map(|bits| {
            let mut dims = q.dims.clone();
            *dims.last_mut().unwrap() = k.dims[k.dims.len() - 2];
            let bytes = bits.iter().map(|&b| b as u8).collect();
            Tensor::<Cpu>::from_host(HostData::Bool(bytes), dims, &dev()).unwrap()
        });
        let mut options = AttentionOptions::new().causal(causal);
        if let Some(m) = &mask {
            options = options.mask(m);
        }
        if dropout {
            options = options.dropout(AttentionDropout { p: 0.25, seed: 3, offset: 11 });
        }
        check(
            |x| x[0].scaled_dot_product_attention(&x[1], &x[2], &options),
            &[&q, &k, &v],
        )?;
    }

    #[test]
    fn self_attention_shares_one_input(x in sizes().prop_flat_map(|(b, l, _, e, _)| {
        input_with(with(&b, l, e), uniform(-1.5, 1.5))
    })) {
        let options = AttentionOptions::new().causal(true).scale(0.7);
        check(|v| v[0].scaled_dot_product_attention(&v[0], &v[0], &options), &[&x])?;
    }
}
