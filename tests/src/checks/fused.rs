//! The fused composites, called directly on the backend: `relu_backward` (exact zeros in `x`
//! everywhere: the gradient at `x == 0` is 0), `gelu_backward` (both tails, specials),
//! `layer_norm` and `layer_norm_backward` (with and without the affine parameters, one-element
//! rows, rows with a large common offset) and `adam_update` (bias corrections of the first
//! steps, coupled and decoupled weight decay, AMSGrad), against their definitions.

use super::{op_failed, with_inputs};
use crate::compare::{assert_close, assert_close_scaled, Tolerance};
use crate::reference::fused::{self, AdamInputs};
use crate::runner::check_property_systematic;
use crate::strategies::{
    regime_value, regime_values, same_shape_patterns, shape, tensor_case_from, tensor_case_of_kind,
    LayoutKind, Pattern, TensorCase, ValueRegime,
};
use proptest::prelude::*;
use tessera_core::backend::AdamUpdate;
use tessera_core::{Backend, DType};

/// Which fused composite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FusedOp {
    /// `relu_backward(x, grad)`.
    ReluBackward,
    /// `gelu_backward(x, grad)`.
    GeluBackward,
    /// `layer_norm(x, weight, bias, eps)`.
    LayerNorm,
    /// `layer_norm_backward(grad, x, weight, (mean, rstd), with_bias)`.
    LayerNormBackward,
    /// `adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)`.
    AdamUpdate,
    /// `matmul_bias(lhs, rhs, bias)`.
    MatmulBias,
    /// `cross_entropy(logits, targets, label_smoothing)`.
    CrossEntropy,
    /// `cross_entropy_backward(logits, targets, grad, label_smoothing)`.
    CrossEntropyBackward,
}

impl FusedOp {
    /// Every fused composite.
    pub const ALL: [FusedOp; 8] = [
        FusedOp::ReluBackward,
        FusedOp::GeluBackward,
        FusedOp::LayerNorm,
        FusedOp::LayerNormBackward,
        FusedOp::AdamUpdate,
        FusedOp::MatmulBias,
        FusedOp::CrossEntropy,
        FusedOp::CrossEntropyBackward,
    ];

    /// The Backend method's name.
    pub fn name(self) -> &'static str {
        match self {
            FusedOp::ReluBackward => "relu_backward",
            FusedOp::GeluBackward => "gelu_backward",
            FusedOp::LayerNorm => "layer_norm",
            FusedOp::LayerNormBackward => "layer_norm_backward",
            FusedOp::AdamUpdate => "adam_update",
            FusedOp::MatmulBias => "matmul_bias",
            FusedOp::CrossEntropy => "cross_entropy",
            FusedOp::CrossEntropyBackward => "cross_entropy_backward",
        }
    }
}

/// One Adam step's hyper-parameters, as `nn`'s optimiser derives an [`AdamUpdate`] from them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamHyper {
    /// Learning rate.
    pub lr: f64,
    /// `β1`.
    pub beta1: f64,
    /// `β2`.
    pub beta2: f64,
    /// `eps`.
    pub eps: f64,
    /// The step number `t` (1 for the first step, where the bias corrections are largest).
    pub step: i32,
    /// Weight decay `λ` and whether it is AdamW's decoupled one.
    pub decay: Option<(f64, bool)>,
}

impl AdamHyper {
    /// The coefficients of the step.
    pub fn update(&self) -> AdamUpdate {
        let (coupled, decoupled) = match self.decay {
            None => (0.0, 1.0),
            Some((l, false)) => (l, 1.0),
            Some((l, true)) => (0.0, 1.0 - self.lr * l),
        };
        AdamUpdate {
            beta1: self.beta1,
            beta2: self.beta2,
            step_size: self.lr / (1.0 - self.beta1.powi(self.step)),
            bias_correction2_sqrt: (1.0 - self.beta2.powi(self.step)).sqrt(),
            eps: self.eps,
            coupled_decay: coupled,
            decoupled_factor: decoupled,
        }
    }
}

/// One case of a fused composite.
#[derive(Clone, Debug)]
pub enum FusedCase {
    /// `relu_backward(x, grad)`.
    Relu {
        /// The ReLU's input: exact zeros (both signs) are frequent.
        x: TensorCase,
        /// The upstream gradient.
        grad: TensorCase,
    },
    /// `gelu_backward(x, grad)`.
    Gelu {
        /// The GELU's input.
        x: TensorCase,
        /// The upstream gradient.
        grad: TensorCase,
    },
    /// `layer_norm`, or with `grad` its backward pass (on the statistics the backend's own
    /// forward pass returns).
    LayerNorm {
        /// The input `[..rows, n]`.
        x: TensorCase,
        /// The scale `[n]`, if any.
        weight: Option<TensorCase>,
        /// The shift `[n]`, if any (the backward pass is asked for its gradient).
        bias: Option<TensorCase>,
        /// Added to the variance.
        eps: f64,
        /// The upstream gradient, for the backward pass.
        grad: Option<TensorCase>,
    },
    /// One Adam step.
    Adam {
        /// Hyper-parameters.
        hyper: AdamHyper,
        /// Parameter, gradient, first moment, second moment (>= 0) and, for AMSGrad, the
        /// running maximum (>= 0).
        tensors: Vec<TensorCase>,
    },
    /// `matmul_bias(lhs, rhs, bias)`.
    MatmulBias {
        /// `[..batch, m, k]`.
        lhs: TensorCase,
        /// `[..batch, k, n]`.
        rhs: TensorCase,
        /// `[n]`.
        bias: TensorCase,
    },
    /// `cross_entropy`, or with `grad` its backward pass.
    CrossEntropy {
        /// The logits `[n, c]`.
        logits: TensorCase,
        /// One class per row, in `0..c`.
        targets: Vec<usize>,
        /// The label smoothing, in `[0, 1]`.
        smoothing: f64,
        /// The upstream gradient `[n]`, for the backward pass.
        grad: Option<TensorCase>,
    },
}

/// Values of a ReLU input: kinks (`±0`) and ties, ordinary values, specials.
fn relu_x_value(dtype: DType) -> BoxedStrategy<f64> {
    prop_oneof![
        2 => regime_value(dtype, ValueRegime::Ties),
        2 => regime_value(dtype, ValueRegime::Ordinary),
        1 => regime_value(dtype, ValueRegime::Specials),
    ]
    .boxed()
}

/// Hyper-parameters: the first five steps or step 1000, every decay mode.
fn hyper() -> BoxedStrategy<AdamHyper> {
    (
        prop::sample::select(vec![1e-3, 1e-2, 0.1, 1.0]),
        prop::sample::select(vec![0.9, 0.5, 0.0]),
        prop::sample::select(vec![0.999, 0.99, 0.5]),
        prop::sample::select(vec![1e-8, 1e-3]),
        prop_oneof![3 => 1i32..=5, 1 => Just(1000)],
        prop_oneof![
            Just(None),
            prop::sample::select(vec![0.01, 0.1]).prop_map(|l| Some((l, false))),
            prop::sample::select(vec![0.01, 0.1]).prop_map(|l| Some((l, true))),
        ],
    )
        .prop_map(|(lr, beta1, beta2, eps, step, decay)| AdamHyper {
            lr,
            beta1,
            beta2,
            eps,
            step,
            decay,
        })
        .boxed()
}

/// The value of Adam tensor `i` (0 param, 1 grad, 2 exp_avg, 3 exp_avg_sq, 4 max): moments of
/// the second order are non-negative; the gradient's values follow `grad_regime`.
fn adam_value(dtype: DType, i: usize, grad_regime: ValueRegime) -> BoxedStrategy<f64> {
    match i {
        1 => regime_value(dtype, grad_regime),
        3 | 4 => regime_value(dtype, ValueRegime::Ordinary)
            .prop_map(f64::abs)
            .boxed(),
        _ => regime_value(dtype, ValueRegime::Ordinary),
    }
}

/// An Adam case with the hyper-parameters from `hyper`, tensors of rank 3 (sizes `2..=4`), or
/// of `shape` when given, tensor `i` laid out as `kinds[i]`.
fn adam_case(
    dtype: DType,
    hyper: BoxedStrategy<AdamHyper>,
    amsgrad: BoxedStrategy<bool>,
    kinds: [LayoutKind; 5],
    grad_regime: ValueRegime,
    random_shape: bool,
) -> BoxedStrategy<FusedCase> {
    let dims = if random_shape {
        shape()
    } else {
        prop::collection::vec(2usize..=4, 3).boxed()
    };
    (hyper, amsgrad, dims)
        .prop_flat_map(move |(hyper, amsgrad, s)| {
            let count = if amsgrad { 5 } else { 4 };
            let tensors: Vec<BoxedStrategy<TensorCase>> = (0..count)
                .map(|i| {
                    let value = adam_value(dtype, i, grad_regime);
                    if random_shape {
                        tensor_case_from(dtype, s.clone(), value)
                    } else {
                        tensor_case_of_kind(dtype, s.clone(), kinds[i], value)
                    }
                })
                .collect();
            (Just(hyper), tensors)
        })
        .prop_map(|(hyper, tensors)| FusedCase::Adam { hyper, tensors })
        .boxed()
}

/// Random cases of `op` on `dtype`: any shape and layout.
pub fn cases(op: FusedOp, dtype: DType) -> BoxedStrategy<FusedCase> {
    match op {
        FusedOp::ReluBackward => shape()
            .prop_flat_map(move |s| {
                (
                    tensor_case_from(dtype, s.clone(), relu_x_value(dtype)),
                    tensor_case_from(dtype, s, regime_value(dtype, ValueRegime::Ordinary)),
                )
            })
            .prop_map(|(x, grad)| FusedCase::Relu { x, grad })
            .boxed(),
        FusedOp::GeluBackward => shape()
            .prop_flat_map(move |s| {
                (
                    tensor_case_from(dtype, s.clone(), gelu_x_value(dtype)),
                    tensor_case_from(dtype, s, regime_value(dtype, ValueRegime::Ordinary)),
                )
            })
            .prop_map(|(x, grad)| FusedCase::Gelu { x, grad })
            .boxed(),
        FusedOp::LayerNorm => layer_norm_case(dtype, None, ValueRegime::Ordinary, false),
        FusedOp::LayerNormBackward => layer_norm_case(dtype, None, ValueRegime::Ordinary, true),
        FusedOp::AdamUpdate => adam_case(
            dtype,
            hyper(),
            any::<bool>().boxed(),
            [LayoutKind::Contiguous; 5],
            ValueRegime::Ordinary,
            true,
        ),
        FusedOp::MatmulBias => matmul_bias_case(dtype, None, ValueRegime::Ordinary),
        FusedOp::CrossEntropy => cross_entropy_case(dtype, None, ValueRegime::Ordinary, false),
        FusedOp::CrossEntropyBackward => {
            cross_entropy_case(dtype, None, ValueRegime::Ordinary, true)
        }
    }
}

/// A product-with-bias case: `[batch, m, k] x [batch, k, n] + [n]` (no batch dimension half of
/// the time; `m` and `n` in `1..=7`, `k` in `0..=9`, so empty sums too), every operand laid out
/// as `kind` (any layout when `None`), the product's operands with values of `regime`.
fn matmul_bias_case(
    dtype: DType,
    kind: Option<LayoutKind>,
    regime: ValueRegime,
) -> BoxedStrategy<FusedCase> {
    let batch = prop_oneof![Just(None), (1usize..=3).prop_map(Some)];
    (batch, 1usize..=7, 0usize..=9, 1usize..=7)
        .prop_flat_map(move |(batch, m, k, n)| {
            let with_batch = |rows: usize, cols: usize| match batch {
                Some(b) => vec![b, rows, cols],
                None => vec![rows, cols],
            };
            let operand = |dims: Vec<usize>, regime: ValueRegime| match kind {
                Some(kind) => tensor_case_of_kind(dtype, dims, kind, regime_value(dtype, regime)),
                None => tensor_case_from(dtype, dims, regime_value(dtype, regime)),
            };
            (
                operand(with_batch(m, k), regime),
                operand(with_batch(k, n), regime),
                operand(vec![n], ValueRegime::Ordinary),
            )
        })
        .prop_map(|(lhs, rhs, bias)| FusedCase::MatmulBias { lhs, rhs, bias })
        .boxed()
}

/// A cross-entropy case: logits `[n, c]` (`n` in `0..=4`, at least 1 outside the ordinary
/// regime, `c` in `1..=40`, so rows shorter and
/// longer than a vector's lanes), laid out as `kind` (any layout when `None`), with values of
/// `regime`; targets in `0..c`; label smoothing 0 (most often), 0.1 or 1; with `backward` an
/// upstream gradient.
fn cross_entropy_case(
    dtype: DType,
    kind: Option<LayoutKind>,
    regime: ValueRegime,
    backward: bool,
) -> BoxedStrategy<FusedCase> {
    let smoothing = prop_oneof![3 => Just(0.0), 1 => Just(0.1), 1 => Just(1.0)];
    // Empty batches with ordinary values; every case of the other regimes has rows to check.
    let first_row = usize::from(regime != ValueRegime::Ordinary);
    (first_row..=4, 1usize..=40, smoothing)
        .prop_flat_map(move |(n, c, smoothing)| {
            let dims = vec![n, c];
            let logits = match kind {
                Some(kind) => tensor_case_of_kind(dtype, dims, kind, regime_value(dtype, regime)),
                // One offset shared by every logit (a row's log-sum-exp is then large and
                // close to each of its logits).
                None if regime == ValueRegime::Shifted => regime_values(dtype, regime, n * c)
                    .prop_map(move |values| TensorCase::contiguous(dtype, vec![n, c], values))
                    .boxed(),
                None => tensor_case_from(dtype, dims, regime_value(dtype, regime)),
            };
            let targets = prop::collection::vec(0..c, n);
            let grad = if backward {
                tensor_case_from(dtype, vec![n], regime_value(dtype, ValueRegime::Ordinary))
                    .prop_map(Some)
                    .boxed()
            } else {
                Just(None).boxed()
            };
            (logits, targets, Just(smoothing), grad)
        })
        .prop_map(
            |(logits, targets, smoothing, grad)| FusedCase::CrossEntropy {
                logits,
                targets,
                smoothing,
                grad,
            },
        )
        .boxed()
}

/// `case` with each row's target moved to the row's largest logit (the first of ties; class 0
/// for a row of NaN): the loss is then small beside the log-sum-exp, so an implementation that
/// rounds the large log-sum-exp before subtracting the target's logit shows its error.
fn targets_at_row_maximum(case: FusedCase) -> FusedCase {
    let FusedCase::CrossEntropy {
        logits,
        smoothing,
        grad,
        ..
    } = case
    else {
        return case;
    };
    let values = logits.reference();
    let c = values.shape[1].max(1);
    let targets = values
        .data
        .chunks(c)
        .map(|row| {
            let best = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            row.iter().position(|&v| v == best).unwrap_or(0)
        })
        .collect();
    FusedCase::CrossEntropy {
        logits,
        targets,
        smoothing,
        grad,
    }
}

/// Values of a GELU input: ordinary values (both tails of `Φ` within `[-10, 10)`), kinks and
/// specials.
fn gelu_x_value(dtype: DType) -> BoxedStrategy<f64> {
    prop_oneof![
        4 => regime_value(dtype, ValueRegime::Ordinary),
        1 => regime_value(dtype, ValueRegime::Ties),
        1 => regime_value(dtype, ValueRegime::Specials),
    ]
    .boxed()
}

/// A layer-norm case: `x` of shape `[..rows, n]` (up to two leading axes, zero rows
/// included, `n` in `1..=9`), laid out as `kind` (any layout when `None`), with values of
/// `regime`; weight and bias each present or not; `eps` from `1e-5` to `0.1`; with `backward`
/// an upstream gradient too.
fn layer_norm_case(
    dtype: DType,
    kind: Option<LayoutKind>,
    regime: ValueRegime,
    backward: bool,
) -> BoxedStrategy<FusedCase> {
    let ordinary = move || regime_value(dtype, ValueRegime::Ordinary);
    (
        crate::strategies::shape_with(0..=2, 0..=4),
        1usize..=9,
        any::<(bool, bool)>(),
        prop::sample::select(vec![1e-5, 1e-3, 0.1]),
    )
        .prop_flat_map(move |(mut dims, n, (affine, bias), eps)| {
            dims.push(n);
            let x = match kind {
                Some(kind) => {
                    tensor_case_of_kind(dtype, dims.clone(), kind, regime_value(dtype, regime))
                }
                None => tensor_case_from(dtype, dims.clone(), regime_value(dtype, regime)),
            };
            let param = move |present: bool| {
                if present {
                    tensor_case_from(dtype, vec![n], ordinary())
                        .prop_map(Some)
                        .boxed()
                } else {
                    Just(None).boxed()
                }
            };
            let grad = if backward {
                tensor_case_from(dtype, dims, ordinary())
                    .prop_map(Some)
                    .boxed()
            } else {
                Just(None).boxed()
            };
            (x, param(affine), param(affine && bias), Just(eps), grad)
        })
        .prop_map(|(x, weight, bias, eps, grad)| FusedCase::LayerNorm {
            x,
            weight,
            bias,
            eps,
            grad,
        })
        .boxed()
}

/// The systematic cases of `op` on `dtype`: every layout kind of every operand; for the ReLU
/// gradient inputs made of zeros and ties, then of specials (a NaN input passes the
/// gradient); for Adam every decay mode with and without AMSGrad at the first step and at step
/// 1000, and gradients up to `1e4` and special.
pub fn patterns(op: FusedOp, dtype: DType) -> Vec<Pattern<FusedCase>> {
    let mut out = Vec::new();
    match op {
        FusedOp::ReluBackward => {
            for p in same_shape_patterns(2) {
                let strategy = p
                    .strategy(
                        vec![dtype; 2],
                        vec![ValueRegime::Ties, ValueRegime::Ordinary],
                    )
                    .prop_map(|v| FusedCase::Relu {
                        x: v[0].clone(),
                        grad: v[1].clone(),
                    })
                    .boxed();
                out.push(Pattern::new(
                    format!("{}, x zeros and ties", p.label(&["x", "grad"])),
                    strategy,
                ));
            }
            let plain = &same_shape_patterns(2)[0];
            let strategy = plain
                .strategy(
                    vec![dtype; 2],
                    vec![ValueRegime::Specials, ValueRegime::Ordinary],
                )
                .prop_map(|v| FusedCase::Relu {
                    x: v[0].clone(),
                    grad: v[1].clone(),
                })
                .boxed();
            out.push(Pattern::new("x NaN, inf, -0", strategy));
        }
        FusedOp::GeluBackward => {
            for p in same_shape_patterns(2) {
                let strategy = p
                    .strategy(
                        vec![dtype; 2],
                        vec![ValueRegime::Ordinary, ValueRegime::Ordinary],
                    )
                    .prop_map(|v| FusedCase::Gelu {
                        x: v[0].clone(),
                        grad: v[1].clone(),
                    })
                    .boxed();
                out.push(Pattern::new(p.label(&["x", "grad"]), strategy));
            }
            for regime in [ValueRegime::Huge, ValueRegime::Specials] {
                let strategy = same_shape_patterns(2)[0]
                    .strategy(vec![dtype; 2], vec![regime, ValueRegime::Ordinary])
                    .prop_map(|v| FusedCase::Gelu {
                        x: v[0].clone(),
                        grad: v[1].clone(),
                    })
                    .boxed();
                out.push(Pattern::new(format!("x {}", regime.name()), strategy));
            }
        }
        FusedOp::LayerNorm | FusedOp::LayerNormBackward => {
            let backward = op == FusedOp::LayerNormBackward;
            for kind in LayoutKind::ALL {
                out.push(Pattern::new(
                    format!("x {kind}"),
                    layer_norm_case(dtype, Some(kind), ValueRegime::Ordinary, backward),
                ));
            }
            for regime in [ValueRegime::Shifted, ValueRegime::Ties] {
                out.push(Pattern::new(
                    format!("x {}", regime.name()),
                    layer_norm_case(dtype, None, regime, backward),
                ));
            }
        }
        FusedOp::AdamUpdate => {
            let names = ["param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"];
            let plain = [LayoutKind::Contiguous; 5];
            for (i, name) in names.iter().enumerate() {
                for kind in LayoutKind::ALL.into_iter().skip(1) {
                    let mut kinds = plain;
                    kinds[i] = kind;
                    out.push(Pattern::new(
                        format!("{name} {kind}"),
                        adam_case(
                            dtype,
                            hyper(),
                            Just(i == 4).boxed(),
                            kinds,
                            ValueRegime::Ordinary,
                            false,
                        ),
                    ));
                }
            }
            for (label, decay) in [
                ("no decay", None),
                ("coupled decay", Some((0.1, false))),
                ("decoupled decay", Some((0.1, true))),
            ] {
                for amsgrad in [false, true] {
                    for step in [1, 1000] {
                        let hyper = hyper()
                            .prop_map(move |h| AdamHyper { decay, step, ..h })
                            .boxed();
                        let ams = if amsgrad { ", AMSGrad" } else { "" };
                        out.push(Pattern::new(
                            format!("{label}{ams}, step {step}"),
                            adam_case(
                                dtype,
                                hyper,
                                Just(amsgrad).boxed(),
                                plain,
                                ValueRegime::Ordinary,
                                false,
                            ),
                        ));
                    }
                }
            }
            for regime in [ValueRegime::Huge, ValueRegime::Specials] {
                out.push(Pattern::new(
                    format!("grad {}", regime.name()),
                    adam_case(dtype, hyper(), any::<bool>().boxed(), plain, regime, false),
                ));
            }
        }
        FusedOp::MatmulBias => {
            for kind in LayoutKind::ALL {
                out.push(Pattern::new(
                    format!("operands {kind}"),
                    matmul_bias_case(dtype, Some(kind), ValueRegime::Ordinary),
                ));
            }
            for regime in [ValueRegime::Huge, ValueRegime::Specials] {
                out.push(Pattern::new(
                    format!("lhs and rhs {}", regime.name()),
                    matmul_bias_case(dtype, None, regime),
                ));
            }
        }
        FusedOp::CrossEntropy | FusedOp::CrossEntropyBackward => {
            let backward = op == FusedOp::CrossEntropyBackward;
            for kind in LayoutKind::ALL {
                out.push(Pattern::new(
                    format!("logits {kind}"),
                    cross_entropy_case(dtype, Some(kind), ValueRegime::Ordinary, backward),
                ));
            }
            for regime in [
                ValueRegime::Huge,
                ValueRegime::Shifted,
                ValueRegime::Specials,
            ] {
                out.push(Pattern::new(
                    format!("logits {}", regime.name()),
                    cross_entropy_case(dtype, None, regime, backward),
                ));
            }
            out.push(Pattern::new(
                "logits shifted by up to 1e4, targets at the row maximum",
                cross_entropy_case(dtype, None, ValueRegime::Shifted, backward)
                    .prop_map(targets_at_row_maximum)
                    .boxed(),
            ));
        }
    }
    out
}

/// Smaller cases of a failing one, for the minimiser ([`crate::minimize::reduce`]): both
/// composites are element-wise over operands of one shape, so each element alone (its values
/// in every operand, as contiguous one-element tensors) is a candidate. proptest's shrinking
/// keeps the shape of a nested strategy (it redraws the values when the shape shrinks), so
/// without this an Adam failure caused by one element is reported on five tensors of hundreds.
pub fn smaller_cases(case: &FusedCase) -> Vec<FusedCase> {
    let tensors: Vec<&TensorCase> = match case {
        FusedCase::Relu { x, grad } | FusedCase::Gelu { x, grad } => vec![x, grad],
        FusedCase::Adam { tensors, .. } => tensors.iter().collect(),
        // Rows and products are not element-wise: proptest's own shrinking has to do.
        FusedCase::LayerNorm { .. }
        | FusedCase::CrossEntropy { .. }
        | FusedCase::MatmulBias { .. } => return Vec::new(),
    };
    let refs: Vec<_> = tensors.iter().map(|t| t.reference()).collect();
    let n = refs[0].numel();
    if n <= 1 || refs.iter().any(|r| r.numel() != n) {
        return Vec::new();
    }
    (0..n)
        .map(|i| {
            let one: Vec<TensorCase> = tensors
                .iter()
                .zip(&refs)
                .map(|(t, r)| TensorCase::contiguous(t.dtype, vec![1], vec![r.data[i]]))
                .collect();
            match case {
                FusedCase::Relu { .. } => FusedCase::Relu {
                    x: one[0].clone(),
                    grad: one[1].clone(),
                },
                FusedCase::Gelu { .. } => FusedCase::Gelu {
                    x: one[0].clone(),
                    grad: one[1].clone(),
                },
                FusedCase::LayerNorm { .. }
                | FusedCase::CrossEntropy { .. }
                | FusedCase::MatmulBias { .. } => unreachable!("returned above"),
                FusedCase::Adam { hyper, .. } => FusedCase::Adam {
                    hyper: *hyper,
                    tensors: one,
                },
            }
        })
        .collect()
}

/// Checks one case against the reference.
pub fn check<B: Backend>(dev: &B, case: &FusedCase) -> Result<(), String> {
    match case {
        FusedCase::Relu { x, grad } => {
            let dtype = x.dtype;
            let (xt, gt) = (super::build(dev, x, "x")?, super::build(dev, grad, "grad")?);
            // Through tensor-core's dispatch, as autograd calls it (the 16-bit rule).
            let got = tessera_core::dispatch::relu_backward(&xt, &gt)
                .map_err(op_failed("relu_backward", &[&xt, &gt]))?;
            let expected = fused::relu_backward(&x.reference(), &grad.reference());
            // The result is `grad` or 0: exact (either sign of a zero).
            assert_close(&got, dtype, &expected, Tolerance::SAME_VALUE)
                .map_err(with_inputs(&[&xt, &gt]))
        }
        FusedCase::Gelu { x, grad } => {
            let dtype = x.dtype;
            let (xt, gt) = (super::build(dev, x, "x")?, super::build(dev, grad, "grad")?);
            let got = tessera_core::dispatch::gelu_backward(&xt, &gt)
                .map_err(op_failed("gelu_backward", &[&xt, &gt]))?;
            let (expected, scale) = fused::gelu_backward(&x.reference(), &grad.reference());
            assert_close_scaled(
                &got,
                dtype,
                &expected,
                &scale,
                Tolerance::transcendental(dtype),
            )
            .map_err(with_inputs(&[&xt, &gt]))
        }
        FusedCase::LayerNorm {
            x,
            weight,
            bias,
            eps,
            grad,
        } => check_layer_norm(dev, x, weight.as_ref(), bias.as_ref(), *eps, grad.as_ref()),
        FusedCase::CrossEntropy {
            logits,
            targets,
            smoothing,
            grad,
        } => check_cross_entropy(dev, logits, targets, *smoothing, grad.as_ref()),
        FusedCase::MatmulBias { lhs, rhs, bias } => {
            let (l, r) = (
                super::build(dev, lhs, "lhs")?,
                super::build(dev, rhs, "rhs")?,
            );
            let b = super::build(dev, bias, "bias")?;
            // Through tensor-core's dispatch, as autograd calls it (the 16-bit rule).
            let got = tessera_core::dispatch::matmul_bias(&l, &r, &b)
                .map_err(op_failed("matmul_bias", &[&l, &r, &b]))?;
            let (lr, rr, br) = (lhs.reference(), rhs.reference(), bias.reference());
            let want = fused::matmul_bias(lhs.dtype, &lr, &rr, &br);
            let k = lhs.shape()[lhs.shape().len() - 1];
            compare_output("out", &got, &want, k + 1).map_err(with_inputs(&[&l, &r, &b]))
        }
        FusedCase::Adam { hyper, tensors } => {
            let dtype = tensors[0].dtype;
            let built = tensors
                .iter()
                .map(|t| super::build(dev, t, "an Adam input"))
                .collect::<Result<Vec<_>, _>>()?;
            let refs: Vec<_> = tensors.iter().map(TensorCase::reference).collect();
            let update = hyper.update();
            // Through tensor-core's dispatch, as the optimizer calls it (the 16-bit rule).
            let got = tessera_core::dispatch::adam_update(
                &built[0],
                &built[1],
                (&built[2], &built[3]),
                built.get(4),
                update,
            )
            .map_err(op_failed("adam_update", &built.iter().collect::<Vec<_>>()))?;
            let inputs = AdamInputs {
                param: &refs[0],
                grad: &refs[1],
                exp_avg: &refs[2],
                exp_avg_sq: &refs[3],
                max_exp_avg_sq: refs.get(4),
            };
            // The scales are the error bounds of the formula's terms (see `fused::adam`):
            // cancellation in `g + λp` or `β1 m + (1 - β1) g` does not shrink them.
            let tol = Tolerance::accumulation(dtype, 8);
            let expected = fused::adam(dtype, &inputs, update, tol.rel);
            let described = |what: &str, e: String| {
                let hint = super::sixteen_bit_hint(dtype, &e);
                format!("{what}: {e}\n  update {update:?}{hint}")
            };
            let outputs = [
                ("param", Some(&got.param)),
                ("exp_avg", Some(&got.exp_avg)),
                ("exp_avg_sq", Some(&got.exp_avg_sq)),
                ("max_exp_avg_sq", got.max_exp_avg_sq.as_ref()),
            ];
            for (k, (what, tensor)) in outputs.into_iter().enumerate() {
                let wanted = k < 3 || tensors.len() == 5;
                match (tensor, wanted) {
                    (Some(t), true) => assert_close_scaled(
                        t,
                        dtype,
                        &expected.values[k],
                        &expected.magnitudes[k],
                        tol,
                    )
                    .map_err(|e| described(what, e))
                    .map_err(with_inputs(&built.iter().collect::<Vec<_>>()))?,
                    (None, false) => {}
                    (Some(_), false) => {
                        return Err(format!("{what} returned without AMSGrad"));
                    }
                    (None, true) => return Err(format!("{what} missing with AMSGrad")),
                }
            }
            Ok(())
        }
    }
}

/// Compares one output with its reference, with an accumulation tolerance of `terms` terms in
/// the output's own dtype (the statistics of a widened 16-bit input stay in f32).
fn compare_output<B: Backend>(
    what: &str,
    got: &tessera_core::Tensor<B>,
    expected: &fused::Scaled,
    terms: usize,
) -> Result<(), String> {
    let dtype = got.dtype();
    assert_close_scaled(
        got,
        dtype,
        &expected.values,
        &expected.magnitudes,
        Tolerance::accumulation(dtype, terms),
    )
    .map_err(|e| format!("{what}: {e}{}", super::sixteen_bit_hint(dtype, &e)))
}

/// `layer_norm` (and with `grad`, `layer_norm_backward` on the statistics the backend's own
/// forward pass returned), through the dispatch as autograd calls them.
fn check_layer_norm<B: Backend>(
    dev: &B,
    x: &TensorCase,
    weight: Option<&TensorCase>,
    bias: Option<&TensorCase>,
    eps: f64,
    grad: Option<&TensorCase>,
) -> Result<(), String> {
    use tessera_core::dispatch;
    let xt = super::build(dev, x, "x")?;
    let wt = weight.map(|w| super::build(dev, w, "weight")).transpose()?;
    let bt = bias.map(|b| super::build(dev, b, "bias")).transpose()?;
    let mut inputs = vec![&xt];
    inputs.extend(wt.iter().chain(bt.iter()));
    let n = *x.shape().last().expect("rank >= 1");
    let rows = x.reference().numel() / n;
    let forward = dispatch::layer_norm(&xt, wt.as_ref(), bt.as_ref(), eps)
        .map_err(op_failed("layer_norm", &inputs))?;
    let (xr, wr, br) = (
        x.reference(),
        weight.map(TensorCase::reference),
        bias.map(TensorCase::reference),
    );
    let Some(grad) = grad else {
        let [y, mean, rstd] = fused::layer_norm(&xr, wr.as_ref(), br.as_ref(), eps);
        compare_output("y", &forward.y, &y, 2 * n + 4)
            .and_then(|()| compare_output("mean", &forward.mean, &mean, n + 2))
            .and_then(|()| compare_output("rstd", &forward.rstd, &rstd, 2 * n + 4))
            .map_err(with_inputs(&inputs))?;
        return Ok(());
    };
    let gt = super::build(dev, grad, "grad")?;
    inputs.push(&gt);
    let stats = (&forward.mean, &forward.rstd);
    let got = dispatch::layer_norm_backward(&gt, &xt, wt.as_ref(), stats, bias.is_some())
        .map_err(op_failed("layer_norm_backward", &inputs))?;
    let [dx, dw, db] = fused::layer_norm_backward(&grad.reference(), &xr, wr.as_ref(), eps);
    compare_output("dx", &got.x, &dx, 4 * n + 8).map_err(with_inputs(&inputs))?;
    for (what, tensor, expected, wanted) in [
        ("dweight", got.weight.as_ref(), &dw, weight.is_some()),
        ("dbias", got.bias.as_ref(), &db, bias.is_some()),
    ] {
        match (tensor, wanted) {
            (Some(t), true) => {
                compare_output(what, t, expected, rows + 2 * n + 8).map_err(with_inputs(&inputs))?
            }
            (None, false) => {}
            (Some(_), false) => return Err(format!("{what} returned but not asked for")),
            (None, true) => return Err(format!("{what} missing")),
        }
    }
    Ok(())
}

/// `cross_entropy` (and with `grad`, `cross_entropy_backward`), through the dispatch as
/// autograd calls them.
fn check_cross_entropy<B: Backend>(
    dev: &B,
    logits: &TensorCase,
    targets: &[usize],
    smoothing: f64,
    grad: Option<&TensorCase>,
) -> Result<(), String> {
    use tessera_core::{dispatch, Tensor};
    let x = super::build(dev, logits, "logits")?;
    let indices: Vec<i64> = targets.iter().map(|&t| t as i64).collect();
    let t = Tensor::from_vec(indices, [targets.len()], dev).map_err(|e| e.to_string())?;
    let c = logits.shape()[1];
    let xr = logits.reference();
    let Some(grad) = grad else {
        let got = dispatch::cross_entropy(&x, &t, smoothing)
            .map_err(op_failed("cross_entropy", &[&x, &t]))?;
        let want = fused::cross_entropy(&xr, targets, smoothing);
        return compare_output("losses", &got, &want, 2 * c + 8).map_err(with_inputs(&[&x, &t]));
    };
    let g = super::build(dev, grad, "grad")?;
    let got = dispatch::cross_entropy_backward(&x, &t, &g, smoothing)
        .map_err(op_failed("cross_entropy_backward", &[&x, &t, &g]))?;
    let want = fused::cross_entropy_backward(&xr, targets, &grad.reference(), smoothing);
    compare_output("dlogits", &got, &want, 2 * c + 8).map_err(with_inputs(&[&x, &t, &g]))
}

/// Checks `op` on `dtype`: the systematic patterns, then 256 random cases.
pub fn run<B: Backend>(dev: &B, op: FusedOp, dtype: DType) {
    check_property_systematic(
        &format!("fused {} {dtype}", op.name()),
        patterns(op, dtype),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
