//! Element-wise ops of two operands with broadcasting, scalar forms and `where_select`.

use crate::common::*;
use proptest::prelude::*;
use tessera_autograd::Var;
use tessera_core::Tensor;

/// Values on the grid `0.2 k` (`k` in -10..10).
fn even_grid() -> BoxedStrategy<f64> {
    (-10i32..10).prop_map(|k| k as f64 * 0.2).boxed()
}

/// Values on the grid `0.2 k + 0.1`: never equal to an `even_grid` value.
fn odd_grid() -> BoxedStrategy<f64> {
    (-10i32..10).prop_map(|k| k as f64 * 0.2 + 0.1).boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn add((a, b) in broadcast_pair(uniform(-2.0, 2.0), uniform(-2.0, 2.0))) {
        check(|v| v[0].add(&v[1]), &[&a, &b])?;
    }

    #[test]
    fn sub((a, b) in broadcast_pair(uniform(-2.0, 2.0), uniform(-2.0, 2.0))) {
        check(|v| v[0].sub(&v[1]), &[&a, &b])?;
    }

    #[test]
    fn mul((a, b) in broadcast_pair(uniform(-2.0, 2.0), uniform(-2.0, 2.0))) {
        check(|v| v[0].mul(&v[1]), &[&a, &b])?;
    }

    #[test]
    fn div((a, b) in broadcast_pair(uniform(-2.0, 2.0), away_from_zero(0.3, 2.0))) {
        check(|v| v[0].div(&v[1]), &[&a, &b])?;
    }

    #[test]
    fn pow((a, b) in broadcast_pair(uniform(0.3, 2.0), uniform(-2.0, 2.0))) {
        check(|v| v[0].pow(&v[1]), &[&a, &b])?;
    }

    #[test]
    fn maximum((a, b) in broadcast_pair(even_grid(), odd_grid())) {
        check(|v| v[0].maximum(&v[1]), &[&a, &b])?;
    }

    #[test]
    fn minimum((a, b) in broadcast_pair(odd_grid(), even_grid())) {
        check(|v| v[0].minimum(&v[1]), &[&a, &b])?;
    }

    #[test]
    fn operators((a, b) in broadcast_pair(uniform(-2.0, 2.0), away_from_zero(0.3, 2.0))) {
        check(
            |v| {
                let sum = (&v[0] + &v[1])?;
                let diff = (&v[0] - &v[1])?;
                let ratio = (&sum / &v[1])?;
                (&(&ratio * &diff)? * 1.5)? - 0.25
            },
            &[&a, &b],
        )?;
    }

    #[test]
    fn add_scalar(x in input(uniform(-2.0, 2.0)), c in -2.0..2.0f64) {
        check(|v| v[0].add_scalar(c), &[&x])?;
    }

    #[test]
    fn sub_scalar(x in input(uniform(-2.0, 2.0)), c in -2.0..2.0f64) {
        check(|v| v[0].sub_scalar(c), &[&x])?;
    }

    #[test]
    fn mul_scalar(x in input(uniform(-2.0, 2.0)), c in -2.0..2.0f64) {
        check(|v| v[0].mul_scalar(c), &[&x])?;
    }

    #[test]
    fn div_scalar(x in input(uniform(-2.0, 2.0)), c in away_from_zero(0.3, 2.0)) {
        check(|v| v[0].div_scalar(c), &[&x])?;
    }

    #[test]
    fn powf(x in input(uniform(0.3, 2.0)), c in prop_oneof![Just(-1.5), Just(0.5), Just(2.0), Just(3.0), -2.0..2.0f64]) {
        check(|v| v[0].powf(c), &[&x])?;
    }

    #[test]
    fn maximum_scalar(x in input(even_grid())) {
        check(|v| v[0].maximum_scalar(0.1), &[&x])?;
    }

    #[test]
    fn minimum_scalar(x in input(even_grid())) {
        check(|v| v[0].minimum_scalar(0.1), &[&x])?;
    }

    #[test]
    fn where_select(
        (a, b) in broadcast_pair(uniform(-2.0, 2.0), uniform(-2.0, 2.0)),
        mask in prop::collection::vec(any::<bool>(), 27),
        mask_rank in 0usize..=3,
    ) {
        // A mask over the last `mask_rank` axes of the broadcast shape (so it broadcasts too).
        let out = tessera_core::Shape::new(a.dims.clone())
            .broadcast_with("test", &tessera_core::Shape::new(b.dims.clone()))
            .unwrap();
        let mask_dims: Vec<usize> = out.dims()[out.rank().saturating_sub(mask_rank)..].to_vec();
        let n: usize = mask_dims.iter().product();
        let bits: Vec<u8> = mask[..n].iter().map(|&m| u8::from(m)).collect();
        let cond = Tensor::from_vec(bits, mask_dims, &dev()).unwrap();
        check(|v| Var::where_select(&cond, &v[0], &v[1]), &[&a, &b])?;
    }

    #[test]
    fn a_var_used_twice(x in input(uniform(-2.0, 2.0))) {
        check(|v| v[0].mul(&v[0])?.add(&v[0].exp()?), &[&x])?;
    }
}
