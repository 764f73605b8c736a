//! Indexing: index_select, gather, cat and stack.

use crate::common::*;
use proptest::prelude::*;
use tessera_autograd::Var;
use tessera_core::{DType, Tensor};

/// A non-scalar input and one of its axes.
fn input_and_axis() -> BoxedStrategy<(Input, usize)> {
    input_nonscalar(uniform(-2.0, 2.0))
        .prop_flat_map(|x| {
            let rank = x.dims.len();
            (Just(x), 0..rank)
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn index_select(
        ((x, axis), picks) in (input_and_axis(), prop::collection::vec(0usize..64, 1..=5)),
    ) {
        // Indices may repeat: their gradients must add up.
        let size = x.dims[axis];
        let picks: Vec<i64> = picks.iter().map(|&p| (p % size) as i64).collect();
        let n = picks.len();
        let indices = Tensor::from_vec(picks, [n], &dev()).unwrap();
        check(|v| v[0].index_select(axis as isize, &indices), &[&x])?;
    }

    #[test]
    fn gather(
        ((x, axis), picks, along) in (input_and_axis(), prop::collection::vec(0usize..64, 81), 1usize..=3),
    ) {
        let size = x.dims[axis];
        let mut index_dims = x.dims.clone();
        index_dims[axis] = along;
        let n: usize = index_dims.iter().product();
        let picks: Vec<i64> = picks[..n].iter().map(|&p| (p % size) as i64).collect();
        let indices = Tensor::from_vec(picks, index_dims, &dev()).unwrap();
        check(|v| v[0].gather(axis as isize, &indices), &[&x])?;
    }

    #[test]
    fn scatter_add(
        ((base, axis), along, picks, values) in (input_and_axis(), 1usize..=3, prop::collection::vec(0usize..64, 81), prop::collection::vec(-2.0..2.0f64, 81)),
    ) {
        // Indices may repeat: their contributions add up.
        let size = base.dims[axis];
        let mut src_dims = base.dims.clone();
        src_dims[axis] = along;
        let n: usize = src_dims.iter().product();
        let picks: Vec<i64> = picks[..n].iter().map(|&p| (p % size) as i64).collect();
        let indices = Tensor::from_vec(picks, src_dims.as_slice(), &dev()).unwrap();
        let src = Input { values: values[..n].to_vec(), dims: src_dims, layout: Layout::Transposed };
        check(|v| v[0].scatter_add(axis as isize, &indices, &v[1]), &[&base, &src])?;
    }

    #[test]
    fn narrow_assign(
        ((base, axis), start, len, values, accumulate) in (input_and_axis(), 0usize..3, 0usize..3, prop::collection::vec(-2.0..2.0f64, 27), any::<bool>()),
    ) {
        let size = base.dims[axis];
        let start = start % size;
        let len = len.min(size - start);
        let mut src_dims = base.dims.clone();
        src_dims[axis] = len;
        let n: usize = src_dims.iter().product();
        let src = Input { values: values[..n].to_vec(), dims: src_dims, layout: Layout::Strided };
        check(|v| v[0].narrow_assign(axis as isize, start, &v[1], accumulate), &[&base, &src])?;
    }

    #[test]
    fn cat(
        (a, b, c, axis) in (dims_nonscalar(), 1usize..=3, 1usize..=3, 1usize..=3).prop_flat_map(|(d, x, y, z)| {
            let rank = d.len();
            (Just(d), Just([x, y, z]), 0..rank)
        }).prop_flat_map(|(d, lens, axis)| {
            let with = |len: usize| { let mut e = d.clone(); e[axis] = len; input_with(e, uniform(-2.0, 2.0)) };
            (with(lens[0]), with(lens[1]), with(lens[2]), Just(axis))
        }),
    ) {
        check(|v| Var::cat(&[&v[0], &v[1], &v[2]], axis as isize), &[&a, &b, &c])?;
    }

    #[test]
    fn stack((a, b, axis) in dims().prop_flat_map(|d| {
        let rank = d.len();
        (input_with(d.clone(), uniform(-2.0, 2.0)), input_with(d, uniform(-2.0, 2.0)), 0..=rank)
    })) {
        check(|v| Var::stack(&[&v[0], &v[1]], axis as isize), &[&a, &b])?;
    }

    #[test]
    fn gradients_reach_only_the_var_inputs_of_a_cat(x in input_nonscalar(uniform(-2.0, 2.0))) {
        // A constant operand in the middle of the list: the others still get their slices.
        let fixed = Var::constant(Tensor::ones(x.dims.as_slice(), DType::F64, &dev()).unwrap());
        check(|v| Var::cat(&[&v[0], &fixed, &v[0]], 0)?.mul(&Var::cat(&[&fixed, &v[0], &fixed], 0)?), &[&x])?;
    }
}
