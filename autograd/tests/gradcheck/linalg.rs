//! Matrix products: plain, batched with broadcasting, and with rank-1 operands.

use crate::common::*;
use proptest::prelude::*;

/// Operand dims for `matmul`: optional batch dims for each side (broadcast-compatible), inner
/// sizes `m, k, n`, and whether each side is a rank-1 vector instead.
fn matmul_dims() -> BoxedStrategy<(Vec<usize>, Vec<usize>)> {
    (
        broadcast_dims(),
        1usize..=3,
        1usize..=3,
        1usize..=3,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|((batch_a, batch_b), m, k, n, vec_a, vec_b)| {
            // The last two batch axes of each: still broadcast-compatible (aligned right).
            let batch_a = batch_a[batch_a.len().saturating_sub(2)..].to_vec();
            let batch_b = batch_b[batch_b.len().saturating_sub(2)..].to_vec();
            let a = if vec_a {
                vec![k]
            } else {
                [batch_a, vec![m, k]].concat()
            };
            let b = if vec_b {
                vec![k]
            } else {
                [batch_b, vec![k, n]].concat()
            };
            (a, b)
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn matmul((a, b) in matmul_dims().prop_flat_map(|(a, b)| {
        (input_with(a, uniform(-2.0, 2.0)), input_with(b, uniform(-2.0, 2.0)))
    })) {
        check(|v| v[0].matmul(&v[1]), &[&a, &b])?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Transposed views on either side (a Linear's `x · Wᵀ`, and `aᵀ · b`), whose gradients
    /// are computed transposed so the parameter's comes back contiguous.
    #[test]
    fn matmul_of_transposed_views(
        (a, b, transpose_a) in (1usize..=4, 1usize..=4, 1usize..=4, any::<bool>())
            .prop_flat_map(|(m, k, n, transpose_a)| {
                let a = if transpose_a { vec![k, m] } else { vec![m, k] };
                (
                    input_with(a, uniform(-2.0, 2.0)),
                    input_with(vec![n, k], uniform(-2.0, 2.0)),
                    Just(transpose_a),
                )
            })
    ) {
        check(
            |v| {
                let a = if transpose_a { v[0].t()? } else { v[0].clone() };
                a.matmul(&v[1].t()?)
            },
            &[&a, &b],
        )?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// A product with a bias (a linear layer in one op): `x · Wᵀ + b` on rank-2 or batched
    /// inputs against a shared weight, gradients for all three.
    #[test]
    fn matmul_bias(
        (x, w, b) in (0usize..=2, 1usize..=4, 1usize..=4, 1usize..=4)
            .prop_flat_map(|(batch, m, k, n)| {
                let x = if batch == 0 { vec![m, k] } else { vec![batch, m, k] };
                (
                    input_with(x, uniform(-2.0, 2.0)),
                    input_with(vec![n, k], uniform(-2.0, 2.0)),
                    input_with(vec![n], uniform(-2.0, 2.0)),
                )
            })
    ) {
        check(|v| v[0].matmul_bias(&v[1].t()?, &v[2]), &[&x, &w, &b])?;
    }
}
