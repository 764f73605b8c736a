//! Softmax family, 2-D convolution and pooling.

use crate::common::*;
use proptest::prelude::*;
use tessera_core::tensor::{conv_output_dims, pool_output_dims};
use tessera_core::{Conv2dParams, Pool2dParams};

/// Input `[n, c, h, w]` and weight `[o, c, kh, kw]` dims plus parameters that fit together.
fn conv_setup() -> BoxedStrategy<(Vec<usize>, Vec<usize>, Conv2dParams)> {
    (
        (1usize..=2, 1usize..=2, 3usize..=5, 3usize..=5),
        (1usize..=3, 1usize..=3, 1usize..=3),
        (
            1usize..=2,
            1usize..=2,
            0usize..=1,
            0usize..=1,
            1usize..=2,
            1usize..=2,
        ),
    )
        .prop_map(|((n, c, h, w), (o, kh, kw), (sh, sw, ph, pw, dh, dw))| {
            let params = Conv2dParams {
                stride: (sh, sw),
                padding: (ph, pw),
                dilation: (dh, dw),
            };
            (vec![n, c, h, w], vec![o, c, kh, kw], params)
        })
        .prop_filter("the kernel must fit the padded input", |(x, w, p)| {
            conv_output_dims(x, w, *p).is_ok()
        })
        .boxed()
}

/// Input `[n, c, h, w]` dims and a pooling window that fits.
fn pool_setup() -> BoxedStrategy<(Vec<usize>, Pool2dParams)> {
    (
        (1usize..=2, 1usize..=2, 2usize..=5, 2usize..=5),
        (
            1usize..=3,
            1usize..=3,
            1usize..=2,
            1usize..=2,
            0usize..=1,
            0usize..=1,
        ),
    )
        .prop_map(|((n, c, h, w), (kh, kw, sh, sw, ph, pw))| {
            let params = Pool2dParams {
                kernel: (kh, kw),
                stride: (sh, sw),
                padding: (ph.min(kh / 2), pw.min(kw / 2)),
            };
            (vec![n, c, h, w], params)
        })
        .prop_filter("the window must fit the padded input", |(x, p)| {
            pool_output_dims("test", x, *p).is_ok()
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn softmax((x, axis) in input_nonscalar(uniform(-3.0, 3.0)).prop_flat_map(|x| {
        let rank = x.dims.len();
        (Just(x), 0..rank)
    })) {
        check(|v| v[0].softmax(axis as isize), &[&x])?;
    }

    #[test]
    fn log_softmax((x, axis) in input_nonscalar(uniform(-3.0, 3.0)).prop_flat_map(|x| {
        let rank = x.dims.len();
        (Just(x), 0..rank)
    })) {
        check(|v| v[0].log_softmax(-(axis as isize) - 1), &[&x])?;
    }

    #[test]
    fn conv2d_with_bias((x, w, b, params) in conv_setup().prop_flat_map(|(x, w, p)| {
        let o = w[0];
        (
            input_with(x, uniform(-1.0, 1.0)),
            input_with(w, uniform(-1.0, 1.0)),
            input_with(vec![o], uniform(-1.0, 1.0)),
            Just(p),
        )
    })) {
        check(|v| v[0].conv2d(&v[1], Some(&v[2]), params), &[&x, &w, &b])?;
    }

    #[test]
    fn conv2d_without_bias((x, w, params) in conv_setup().prop_flat_map(|(x, w, p)| {
        (input_with(x, uniform(-1.0, 1.0)), input_with(w, uniform(-1.0, 1.0)), Just(p))
    })) {
        check(|v| v[0].conv2d(&v[1], None, params), &[&x, &w])?;
    }

    #[test]
    fn max_pool2d((x, params) in pool_setup().prop_flat_map(|(x, p)| {
        (distinct_input_with(x), Just(p))
    })) {
        check(|v| v[0].max_pool2d(params), &[&x])?;
    }

    #[test]
    fn avg_pool2d((x, params) in pool_setup().prop_flat_map(|(x, p)| {
        (input_with(x, uniform(-2.0, 2.0)), Just(p))
    })) {
        check(|v| v[0].avg_pool2d(params), &[&x])?;
    }
}
