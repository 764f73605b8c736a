//! Shape ops and dtype conversion.

use crate::common::*;
use proptest::prelude::*;
use tessera_core::DType;

/// A non-scalar input with a random axis of it.
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
    fn reshape(x in input(uniform(-2.0, 2.0))) {
        let reversed: Vec<usize> = x.dims.iter().rev().copied().collect();
        check(|v| v[0].reshape(reversed.as_slice()), &[&x])?;
    }

    #[test]
    fn reshape_infer(x in input_nonscalar(uniform(-2.0, 2.0))) {
        check(|v| v[0].reshape_infer(&[-1, 1]), &[&x])?;
    }

    #[test]
    fn flatten(x in input_nonscalar(uniform(-2.0, 2.0))) {
        let last = x.dims.len() as isize - 1;
        check(|v| v[0].flatten(0, last), &[&x])?;
    }

    #[test]
    fn view(dims in dims()) {
        // `view` needs strides that allow it: a contiguous input.
        let x = Input { values: (0..dims.iter().product::<usize>()).map(|i| i as f64 * 0.1).collect(), dims, layout: Layout::Contiguous };
        check(|v| v[0].view([x.values.len()]), &[&x])?;
    }

    #[test]
    fn permute((x, seed) in (input(uniform(-2.0, 2.0)), any::<u64>())) {
        // A random permutation of the axes, from a seeded shuffle.
        let mut perm: Vec<usize> = (0..x.dims.len()).collect();
        let mut s = seed;
        for i in (1..perm.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            perm.swap(i, (s >> 33) as usize % (i + 1));
        }
        check(|v| v[0].permute(&perm), &[&x])?;
    }

    #[test]
    fn transpose((x, axis) in input_and_axis()) {
        check(|v| v[0].transpose(axis as isize, -1), &[&x])?;
    }

    #[test]
    fn t(x in dims_nonscalar().prop_flat_map(|mut d| { d.push(2); input_with(d, uniform(-2.0, 2.0)) })) {
        check(|v| v[0].t(), &[&x])?;
    }

    #[test]
    fn broadcast_to((small, big) in broadcast_dims().prop_flat_map(|(a, b)| {
        let out = tessera_core::Shape::new(a.clone()).broadcast_with("test", &tessera_core::Shape::new(b)).unwrap();
        (input_with(a, uniform(-2.0, 2.0)), Just(out.dims().to_vec()))
    })) {
        check(|v| v[0].broadcast_to(big.as_slice()), &[&small])?;
        check(|v| v[0].expand(big.as_slice()), &[&small])?;
    }

    #[test]
    fn narrow(((x, axis), start, len) in (input_and_axis(), 0usize..3, 0usize..3)) {
        let size = x.dims[axis];
        let start = start % size;
        let len = len.min(size - start);
        check(|v| v[0].narrow(axis as isize, start, len), &[&x])?;
    }

    #[test]
    fn slice(((x, axis), start, step) in (input_and_axis(), 0usize..3, 1usize..3)) {
        let size = x.dims[axis];
        let start = start % size;
        check(|v| v[0].slice(axis as isize, start, size, step), &[&x])?;
    }

    #[test]
    fn squeeze_and_unsqueeze((x, axis) in input_and_axis()) {
        check(|v| v[0].unsqueeze(axis as isize)?.mul_scalar(2.0)?.squeeze(axis as isize), &[&x])?;
        check(|v| v[0].unsqueeze(-1), &[&x])?;
    }

    #[test]
    fn squeeze_all(x in input(uniform(-2.0, 2.0))) {
        check(|v| v[0].unsqueeze(0)?.squeeze_all(), &[&x])?;
    }

    #[test]
    fn contiguous(x in input(uniform(-2.0, 2.0))) {
        check(|v| v[0].contiguous(), &[&x])?;
    }

    #[test]
    fn to_dtype_same(x in input(uniform(-2.0, 2.0))) {
        check(|v| v[0].to_dtype(DType::F64), &[&x])?;
    }
}
