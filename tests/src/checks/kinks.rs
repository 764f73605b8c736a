//! Gradients exactly at kinks and ties, through autograd on the backend, against PyTorch's
//! rules: `relu'(0) = 0`, `leaky_relu'(0) = slope`, `abs'(0) = 0`, a max reduction shares its
//! gradient evenly among tied maxima, `maximum` splits it in half on a tie, and max pooling
//! sends each window's gradient to the first position of its maximum.
//!
//! The finite-difference checks of [`super::gradients`] keep their inputs away from kinks (a
//! derivative there is a convention, not a limit); these rows put every input on one: values
//! are drawn from `{-1, -0, 0, 1, 2}`. A backend whose `relu_backward` passes the gradient at
//! `x == 0`, or whose max pooling records the last of tied positions, fails here.

use crate::compare::{compare_values, Tolerance};
use crate::reference::{pool, RefArray};
use crate::runner::check_property;
use crate::strategies::{regime_value, shape_with, LayoutRecipe, TensorCase, ValueRegime};
use proptest::prelude::*;
use tessera_autograd::{enable_grad, Var};
use tessera_core::random::sample_f64;
use tessera_core::{Backend, DType, Distribution, Pool2dParams, Tensor};

/// The slope of the leaky ReLU checked.
pub const LEAKY_SLOPE: f64 = 0.25;

/// An op checked at its kinks or ties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kink {
    /// `relu` at `x == 0` (gradient 0).
    Relu,
    /// `leaky_relu(0.25)` at `x == 0` (gradient `0.25`).
    LeakyRelu,
    /// `abs` at `x == 0` (gradient 0).
    Abs,
    /// `max` over every axis with tied maxima (each gets `1 / count`).
    MaxTies,
    /// `maximum(a, b)` with `a == b` (each gets half).
    MaximumTies,
    /// 2x2 max pooling of windows with tied maxima (the first position gets it all).
    MaxPoolTies,
}

impl Kink {
    /// Every kink checked.
    pub const ALL: [Kink; 6] = [
        Kink::Relu,
        Kink::LeakyRelu,
        Kink::Abs,
        Kink::MaxTies,
        Kink::MaximumTies,
        Kink::MaxPoolTies,
    ];

    /// Name in the coverage matrix.
    pub fn name(self) -> &'static str {
        match self {
            Kink::Relu => "relu at 0",
            Kink::LeakyRelu => "leaky_relu at 0",
            Kink::Abs => "abs at 0",
            Kink::MaxTies => "max with ties",
            Kink::MaximumTies => "maximum with ties",
            Kink::MaxPoolTies => "max_pool2d with ties",
        }
    }
}

/// One kink case: contiguous inputs of values in `{-1, -0, 0, 1, 2}`.
#[derive(Clone, Debug)]
pub struct KinkCase {
    /// The op.
    pub kink: Kink,
    /// One input, or two of one shape for `maximum`.
    pub inputs: Vec<TensorCase>,
}

/// Cases of `kink` on `dtype`.
pub fn cases(kink: Kink, dtype: DType) -> BoxedStrategy<KinkCase> {
    let shape = match kink {
        Kink::MaxPoolTies => (1usize..=2, 2usize..=6, 2usize..=6)
            .prop_map(|(c, h, w)| vec![1, c, h, w])
            .boxed(),
        _ => shape_with(1..=3, 1..=4),
    };
    let count = if kink == Kink::MaximumTies { 2 } else { 1 };
    shape
        .prop_flat_map(move |s| {
            let n: usize = s.iter().product();
            let tensors: Vec<BoxedStrategy<TensorCase>> = (0..count)
                .map(|_| {
                    let s = s.clone();
                    prop::collection::vec(regime_value(dtype, ValueRegime::Ties), n)
                        .prop_map(move |source| TensorCase {
                            dtype,
                            recipe: LayoutRecipe::contiguous(s.clone()),
                            source,
                        })
                        .boxed()
                })
                .collect();
            tensors
        })
        .prop_map(move |inputs| KinkCase { kink, inputs })
        .boxed()
}

/// The pooling window of [`Kink::MaxPoolTies`].
fn window() -> Pool2dParams {
    Pool2dParams::square(2)
}

/// The upstream gradient `r` (normal samples of seed 11, the same on every backend).
fn upstream(n: usize) -> Vec<f64> {
    (0..n as u64)
        .map(|i| {
            let normal = Distribution::Normal {
                mean: 0.0,
                std: 1.0,
            };
            sample_f64(normal, 11, i)
        })
        .collect()
}

/// PyTorch's gradient of every input for the upstream gradient `r` (of the output's shape).
fn expected(case: &KinkCase, r: &[f64]) -> Vec<RefArray> {
    let x = case.inputs[0].reference();
    let each = |f: &dyn Fn(f64, f64) -> f64| {
        RefArray::new(
            x.shape.clone(),
            x.data.iter().zip(r).map(|(&v, &g)| f(v, g)).collect(),
        )
    };
    match case.kink {
        Kink::Relu => vec![each(&|v, g| if v > 0.0 { g } else { 0.0 })],
        Kink::LeakyRelu => vec![each(&|v, g| if v > 0.0 { g } else { LEAKY_SLOPE * g })],
        Kink::Abs => vec![each(&|v, g| {
            if v > 0.0 {
                g
            } else if v < 0.0 {
                -g
            } else {
                0.0
            }
        })],
        Kink::MaxTies => {
            let m = x.data.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let count = x.data.iter().filter(|&&v| v == m).count() as f64;
            vec![x.map(|v| if v == m { r[0] / count } else { 0.0 })]
        }
        Kink::MaximumTies => {
            let y = case.inputs[1].reference();
            let share = |a: f64, b: f64, g: f64| {
                if a > b {
                    g
                } else if a == b {
                    g / 2.0
                } else {
                    0.0
                }
            };
            let ga = (0..x.numel()).map(|i| share(x.data[i], y.data[i], r[i]));
            let gb = (0..x.numel()).map(|i| share(y.data[i], x.data[i], r[i]));
            vec![
                RefArray::new(x.shape.clone(), ga.collect()),
                RefArray::new(x.shape.clone(), gb.collect()),
            ]
        }
        Kink::MaxPoolTies => {
            let (_, arg) = pool::max_pool2d(&x, window());
            let g = RefArray::new(arg.shape.clone(), r.to_vec());
            vec![pool::max_pool2d_backward(
                DType::F64,
                &g,
                &arg,
                &x.shape,
                window(),
            )]
        }
    }
}

/// The op on the inputs as variables.
fn apply<B: Backend>(kink: Kink, x: &[Var<B>]) -> tessera_core::Result<Var<B>> {
    match kink {
        Kink::Relu => x[0].relu(),
        Kink::LeakyRelu => x[0].leaky_relu(LEAKY_SLOPE),
        Kink::Abs => x[0].abs(),
        Kink::MaxTies => x[0].max(&[], false),
        Kink::MaximumTies => x[0].maximum(&x[1]),
        Kink::MaxPoolTies => x[0].max_pool2d(window()),
    }
}

/// Runs the op and its backward pass on `dev` and compares every input's gradient with
/// PyTorch's rule (the simple tolerance: the gradients are `r`, `slope * r`, `r / count`).
pub fn check<B: Backend>(dev: &B, case: &KinkCase) -> Result<(), String> {
    let dtype = case.inputs[0].dtype;
    let failed = |e: tessera_core::Error| format!("{e}");
    let params: Vec<Var<B>> = case
        .inputs
        .iter()
        .map(|c| c.build(dev).map(Var::param))
        .collect::<tessera_core::Result<_>>()
        .map_err(failed)?;
    let y = enable_grad(|| apply(case.kink, &params)).map_err(failed)?;
    let r = upstream(y.numel());
    let rt = Tensor::from_f64_values(&r, y.dims().to_vec(), dtype, dev).map_err(failed)?;
    // The gradients are computed from `r` as the dtype holds it.
    let r: Vec<f64> = rt.to_vec_f64().map_err(failed)?;
    y.backward_with(&rt).map_err(failed)?;
    for (i, (p, want)) in params.iter().zip(expected(case, &r)).enumerate() {
        let got = match p.grad() {
            Some(g) => g.to_vec_f64().map_err(failed)?,
            None => vec![0.0; p.numel()],
        };
        let want = want.map(|v| crate::reference::elementwise::round_to(dtype, v));
        compare_values(&got, &want.shape, &want, None, Tolerance::simple(dtype))
            .map_err(|e| format!("gradient of input {i} of {}: {e}", case.kink.name()))?;
    }
    Ok(())
}

/// Checks `kink` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, kink: Kink, dtype: DType) {
    check_property(
        &format!("gradient {} {dtype}", kink.name()),
        cases(kink, dtype),
        |c| check(dev, c),
    );
}
