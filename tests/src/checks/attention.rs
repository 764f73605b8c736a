//! Scaled dot-product attention and its gradient: random batch dimensions (none to two),
//! lengths `L`, `S` (keys may be absent) and widths, q/k/v of any layout or split as heads out
//! of one packed `[n, t, 3, h, e]` projection (non-contiguous views, as a transformer makes
//! them), causal masking, bool and additive masks of any broadcastable shape (fully masked rows
//! included), an explicit scale and dropout, against the loops of
//! [`crate::reference::attention`]. Systematic [`patterns`] come first in every run: each
//! mask kind and shape, with and without causal masking, every layout kind of q/k/v, batch
//! ranks 0 to 2, no keys, unequal lengths under causal masking and scores that overflow `exp`
//! without the max shift.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close_scaled, Tolerance};
use crate::reference::attention::{RefAttention, RefMask};
use crate::reference::{views, RefArray};
use crate::runner::check_property_systematic;
use crate::strategies::{
    broadcastable_to, shape_with, tensor_case, tensor_case_from, tensor_case_of_kind, value,
    LayoutKind, Pattern, TensorCase, ValueProfile,
};
use proptest::prelude::*;
use tessera_core::{AttentionDropout, AttentionOptions, Backend, DType, Tensor};

/// Which pass is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionOp {
    /// The output and the log-sum-exp.
    Forward,
    /// The gradients with respect to q, k and v.
    Backward,
}

impl AttentionOp {
    /// Both passes.
    pub const ALL: [AttentionOp; 2] = [AttentionOp::Forward, AttentionOp::Backward];

    /// `"scaled_dot_product_attention"` or its `_backward`.
    pub fn name(self) -> &'static str {
        match self {
            AttentionOp::Forward => "scaled_dot_product_attention",
            AttentionOp::Backward => "scaled_dot_product_attention_backward",
        }
    }
}

/// How q, k and v are made.
#[derive(Clone, Debug)]
pub enum Inputs {
    /// Three tensors of random layouts.
    Separate {
        /// `[..b, L, E]`.
        q: TensorCase,
        /// `[..b, S, E]`.
        k: TensorCase,
        /// `[..b, S, Ev]`.
        v: TensorCase,
    },
    /// Views of one contiguous `[n, t, 3, h, e]` tensor: q, k, v are `[n, h, t, e]`.
    HeadSplit {
        /// The packed projection.
        packed: TensorCase,
    },
}

/// The mask of a case.
#[derive(Clone, Debug)]
pub enum MaskCase {
    /// No mask.
    None,
    /// A bool mask of a shape broadcastable to `[..b, L, S]`.
    Bool(TensorCase),
    /// An additive mask (some `-inf`) of a broadcastable shape.
    Additive(TensorCase),
}

/// One attention call.
#[derive(Clone, Debug)]
pub struct AttentionCase {
    /// The pass checked.
    pub op: AttentionOp,
    /// Element type.
    pub dtype: DType,
    /// The batch dimensions `..b`.
    pub batch: Vec<usize>,
    /// `(L, S, E, Ev)`.
    pub sizes: (usize, usize, usize, usize),
    /// q, k, v.
    pub inputs: Inputs,
    /// The mask.
    pub mask: MaskCase,
    /// Causal masking.
    pub causal: bool,
    /// An explicit scale (else `1/√E`).
    pub scale: Option<f64>,
    /// Dropout.
    pub dropout: Option<AttentionDropout>,
    /// The upstream gradient `[..b, L, Ev]` (backward only).
    pub grad: Option<TensorCase>,
}

fn with(batch: &[usize], rows: usize, cols: usize) -> Vec<usize> {
    let mut d = batch.to_vec();
    d.extend([rows, cols]);
    d
}

/// Values of moderate magnitude (scores stay far from overflow), no specials.
const PROFILE: ValueProfile = ValueProfile {
    magnitude: 2.0,
    ..ValueProfile::FINITE
};

/// An additive mask value of `dtype`: mostly finite, sometimes `-inf`.
fn additive_value(dtype: DType) -> BoxedStrategy<f64> {
    prop_oneof![
        5 => (-3.0f64..3.0).prop_map(move |v| crate::reference::elementwise::round_to(dtype, v)),
        1 => Just(f64::NEG_INFINITY),
    ]
    .boxed()
}

/// Which keys a mask case's shape keeps, relative to the scores `[..b, L, S]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MaskShape {
    /// Any shape broadcastable to the scores (drawn).
    Random,
    /// The scores' full shape.
    Full,
    /// `[..b, 1, S]`: one row of keys per batch entry, as a padding mask is.
    KeyPadding,
    /// `[L, S]`: one matrix shared by every batch entry.
    Shared,
}

impl MaskShape {
    /// The mask's shape for scores `scores` (`[..b, L, S]`), or `None` when drawn.
    fn apply(self, scores: &[usize]) -> Option<Vec<usize>> {
        let r = scores.len();
        match self {
            MaskShape::Random => None,
            MaskShape::Full => Some(scores.to_vec()),
            MaskShape::KeyPadding => {
                let mut d = scores.to_vec();
                d[r - 2] = 1;
                Some(d)
            }
            MaskShape::Shared => Some(scores[r - 2..].to_vec()),
        }
    }
}

/// The kind of mask of a case: none, bool (`true` keeps a key, with the given chance) or
/// additive (some `-inf`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum MaskKind {
    None,
    Bool { shape: MaskShape, keep: f64 },
    Additive { shape: MaskShape },
}

/// Everything about a case but its values and layouts: fixed by a pattern, or drawn.
#[derive(Clone, Debug)]
struct Structure {
    batch: Vec<usize>,
    /// `(L, S, E, Ev)`.
    sizes: (usize, usize, usize, usize),
    /// q, k, v split as heads out of one packed projection (then `S = L`, `Ev = E`).
    head_split: bool,
    /// The layout kind of q, k and v when separate; `None` draws a random layout per tensor.
    layout: Option<LayoutKind>,
    mask: MaskKind,
    causal: bool,
    scale: Option<f64>,
    dropout: Option<AttentionDropout>,
    /// Bound of the values of q, k, v (and the upstream gradient).
    magnitude: f64,
}

/// A tensor case of `shape` laid out as `layout` (random when `None`).
fn operand(
    dtype: DType,
    shape: Vec<usize>,
    layout: Option<LayoutKind>,
    magnitude: f64,
) -> BoxedStrategy<TensorCase> {
    let profile = ValueProfile {
        magnitude,
        ..ValueProfile::FINITE
    };
    match layout {
        None => tensor_case(dtype, shape, profile),
        Some(kind) => tensor_case_of_kind(dtype, shape, kind, value(dtype, profile)),
    }
}

/// The cases of one structure: its values, layouts and (for [`MaskShape::Random`]) mask shape.
fn case_of(op: AttentionOp, dtype: DType, st: Structure) -> BoxedStrategy<AttentionCase> {
    let (l, s, e, ev) = st.sizes;
    let batch = st.batch.clone();
    let inputs = if st.head_split {
        let (n, h) = (batch[0], batch[1]);
        operand(dtype, vec![n, l, 3, h, e], None, st.magnitude)
            .prop_map(|packed| Inputs::HeadSplit { packed })
            .boxed()
    } else {
        (
            operand(dtype, with(&batch, l, e), st.layout, st.magnitude),
            operand(dtype, with(&batch, s, e), st.layout, st.magnitude),
            operand(dtype, with(&batch, s, ev), st.layout, st.magnitude),
        )
            .prop_map(|(q, k, v)| Inputs::Separate { q, k, v })
            .boxed()
    };
    let scores = with(&batch, l, s);
    let shape_of = move |shape: MaskShape| match shape.apply(&scores) {
        Some(fixed) => Just(fixed).boxed(),
        None => broadcastable_to(scores.clone()),
    };
    let mask = match st.mask {
        MaskKind::None => Just(MaskCase::None).boxed(),
        MaskKind::Bool { shape, keep } => shape_of(shape)
            .prop_flat_map(move |shape| {
                let bit = prop::bool::weighted(keep)
                    .prop_map(|b| if b { 1.0 } else { 0.0 })
                    .boxed();
                tensor_case_from(DType::Bool, shape, bit)
            })
            .prop_map(MaskCase::Bool)
            .boxed(),
        MaskKind::Additive { shape } => shape_of(shape)
            .prop_flat_map(move |shape| tensor_case_from(dtype, shape, additive_value(dtype)))
            .prop_map(MaskCase::Additive)
            .boxed(),
    };
    let grad = match op {
        AttentionOp::Forward => Just(None).boxed(),
        AttentionOp::Backward => operand(dtype, with(&batch, l, ev), None, st.magnitude)
            .prop_map(Some)
            .boxed(),
    };
    (inputs, mask, grad)
        .prop_map(move |(inputs, mask, grad)| AttentionCase {
            op,
            dtype,
            batch: st.batch.clone(),
            sizes: st.sizes,
            inputs,
            mask,
            causal: st.causal,
            scale: st.scale,
            dropout: st.dropout,
            grad,
        })
        .boxed()
}

/// Random cases of `op` on `dtype`.
pub fn cases(op: AttentionOp, dtype: DType) -> BoxedStrategy<AttentionCase> {
    let sizes = (
        shape_with(0..=2, 1..=3),
        1usize..=5,
        0usize..=5,
        1usize..=4,
        0usize..=4,
        0u8..4,
    );
    let flags = (
        any::<bool>(),
        0u8..3,
        prop::option::weighted(0.2, 0.25f64..2.0),
        // Dropout counters start anywhere, up to the end of the counter space: the draws of
        // one call then wrap around modulo 2^64 (the contract's rule), which a backend that
        // overflows, saturates or refuses fails.
        prop::option::weighted(
            0.3,
            (
                any::<u64>(),
                prop_oneof![0u64..1000, (u64::MAX - 200)..=u64::MAX],
            ),
        ),
    );
    (sizes, flags)
        .prop_flat_map(move |((batch, l, s, e, ev, split), flags)| {
            // One case in four splits heads out of a packed projection: [n, h], S = L, Ev = E.
            let head_split = split == 0;
            let (batch, s, ev) = if head_split {
                let n = batch.first().copied().unwrap_or(2);
                (vec![n, batch.get(1).copied().unwrap_or(2)], l, e)
            } else {
                (batch, s, ev)
            };
            let (causal, mask_kind, scale, dropout) = flags;
            let mask = match mask_kind {
                0 => MaskKind::None,
                1 => MaskKind::Bool {
                    shape: MaskShape::Random,
                    keep: 0.75,
                },
                _ => MaskKind::Additive {
                    shape: MaskShape::Random,
                },
            };
            case_of(
                op,
                dtype,
                Structure {
                    batch,
                    sizes: (l, s, e, ev),
                    head_split,
                    layout: None,
                    mask,
                    causal,
                    scale,
                    dropout: dropout.map(|(seed, offset)| AttentionDropout {
                        p: 0.25,
                        seed,
                        offset,
                    }),
                    magnitude: PROFILE.magnitude,
                },
            )
        })
        .boxed()
}

/// The systematic patterns of `op` on `dtype`, each run in every run of the suite: every mask
/// kind and shape with and without causal masking, fully masked rows, q/k/v in every layout
/// kind and split as heads, batch ranks 0 to 2, no keys, more or fewer queries than keys under
/// causal masking, scores large enough that a softmax without the max shift overflows, dropout
/// and an explicit scale.
pub fn patterns(op: AttentionOp, dtype: DType) -> Vec<Pattern<AttentionCase>> {
    let base = Structure {
        batch: vec![2, 2],
        sizes: (3, 3, 3, 3),
        head_split: false,
        layout: None,
        mask: MaskKind::None,
        causal: false,
        scale: None,
        dropout: None,
        magnitude: PROFILE.magnitude,
    };
    let mut fixed: Vec<(String, Structure)> = Vec::new();
    let masks = [
        ("no mask", MaskKind::None),
        (
            "bool mask [..b, L, S]",
            MaskKind::Bool {
                shape: MaskShape::Full,
                keep: 0.75,
            },
        ),
        (
            "bool key-padding mask [..b, 1, S]",
            MaskKind::Bool {
                shape: MaskShape::KeyPadding,
                keep: 0.75,
            },
        ),
        (
            "bool mask masking every key",
            MaskKind::Bool {
                shape: MaskShape::Full,
                keep: 0.0,
            },
        ),
        (
            "additive mask [..b, L, S]",
            MaskKind::Additive {
                shape: MaskShape::Full,
            },
        ),
        (
            "additive mask [L, S] shared",
            MaskKind::Additive {
                shape: MaskShape::Shared,
            },
        ),
    ];
    for (label, mask) in masks {
        for causal in [false, true] {
            let name = format!("{label}{}", if causal { ", causal" } else { "" });
            fixed.push((
                name,
                Structure {
                    mask,
                    causal,
                    ..base.clone()
                },
            ));
        }
    }
    for kind in LayoutKind::ALL {
        fixed.push((
            format!("q, k, v {kind}"),
            Structure {
                layout: Some(kind),
                ..base.clone()
            },
        ));
    }
    for causal in [false, true] {
        fixed.push((
            format!(
                "heads split from a packed projection{}",
                if causal { ", causal" } else { "" }
            ),
            Structure {
                head_split: true,
                causal,
                ..base.clone()
            },
        ));
    }
    for batch in [vec![], vec![3], vec![2, 3]] {
        fixed.push((
            format!("batch dims {batch:?}"),
            Structure {
                batch,
                ..base.clone()
            },
        ));
    }
    fixed.push((
        "no keys (S = 0)".into(),
        Structure {
            sizes: (3, 0, 3, 3),
            ..base.clone()
        },
    ));
    fixed.push((
        "causal, more queries than keys".into(),
        Structure {
            sizes: (5, 2, 3, 2),
            causal: true,
            ..base.clone()
        },
    ));
    fixed.push((
        "causal, fewer queries than keys".into(),
        Structure {
            sizes: (2, 5, 3, 4),
            causal: true,
            ..base.clone()
        },
    ));
    for causal in [false, true] {
        // |x| up to 30 with E = 4: scores reach ~1800, far beyond exp's f32 and f64 range.
        fixed.push((
            format!("large scores{}", if causal { ", causal" } else { "" }),
            Structure {
                sizes: (3, 4, 4, 3),
                magnitude: 30.0,
                causal,
                ..base.clone()
            },
        ));
    }
    fixed.push((
        "dropout 0.25".into(),
        Structure {
            dropout: Some(AttentionDropout {
                p: 0.25,
                seed: 7,
                offset: 11,
            }),
            ..base.clone()
        },
    ));
    fixed.push((
        "explicit scale".into(),
        Structure {
            scale: Some(0.7),
            ..base.clone()
        },
    ));
    fixed
        .into_iter()
        .map(|(label, st)| Pattern::new(label, case_of(op, dtype, st)))
        .collect()
}

/// q, k, v on the device and their logical values.
fn inputs<B: Backend>(
    dev: &B,
    case: &AttentionCase,
) -> Result<([Tensor<B>; 3], [RefArray; 3]), String> {
    match &case.inputs {
        Inputs::Separate { q, k, v } => Ok((
            [
                build(dev, q, "q")?,
                build(dev, k, "k")?,
                build(dev, v, "v")?,
            ],
            [q.reference(), k.reference(), v.reference()],
        )),
        Inputs::HeadSplit { packed } => {
            let t = build(dev, packed, "packed q/k/v")?;
            let r = packed.reference();
            let head = |i: usize| -> Result<(Tensor<B>, RefArray), String> {
                let view = t
                    .narrow(2, i, 1)
                    .and_then(|x| x.squeeze(2))
                    .and_then(|x| x.permute(&[0, 2, 1, 3]))
                    .map_err(|e| format!("head split failed: {e}"))?;
                let values = views::permute(
                    &views::squeeze(&views::narrow(&r, 2, i, 1), 2),
                    &[0, 2, 1, 3],
                );
                Ok((view, values))
            };
            let (q, qr) = head(0)?;
            let (k, kr) = head(1)?;
            let (v, vr) = head(2)?;
            Ok(([q, k, v], [qr, kr, vr]))
        }
    }
}

/// `x` flattened to `[nb, rows, cols]`.
fn flat(x: &RefArray, nb: usize) -> RefArray {
    let r = x.rank();
    RefArray::new(vec![nb, x.shape[r - 2], x.shape[r - 1]], x.data.clone())
}

/// Compares the backend's pass with the reference.
pub fn check<B: Backend>(dev: &B, case: &AttentionCase) -> Result<(), String> {
    let dtype = case.dtype;
    let ([q, k, v], [qr, kr, vr]) = inputs(dev, case)?;
    let (l, s, e, ev) = case.sizes;
    let scores = with(&case.batch, l, s);
    let (mask, ref_mask) = match &case.mask {
        MaskCase::None => (None, RefMask::None),
        MaskCase::Bool(m) | MaskCase::Additive(m) => {
            let t = build(dev, m, "mask")?;
            let full = views::broadcast_to(&m.reference(), &scores).data;
            let r = if matches!(case.mask, MaskCase::Bool(_)) {
                RefMask::Bool(full)
            } else {
                RefMask::Additive(full)
            };
            (Some(t), r)
        }
    };
    let mut options = AttentionOptions::new().causal(case.causal);
    if let Some(m) = &mask {
        options = options.mask(m);
    }
    if let Some(sc) = case.scale {
        options = options.scale(sc);
    }
    if let Some(d) = case.dropout {
        options = options.dropout(d);
    }
    let nb: usize = case.batch.iter().product();
    let reference = RefAttention {
        dtype,
        nb,
        q: flat(&qr, nb),
        k: flat(&kr, nb),
        v: flat(&vr, nb),
        mask: ref_mask,
        causal: case.causal,
        scale: case.scale.unwrap_or(1.0 / (e.max(1) as f64).sqrt()),
        dropout: case.dropout.map(|d| (d.p, d.seed, d.offset)),
    };
    let mut all: Vec<&Tensor<B>> = vec![&q, &k, &v];
    all.extend(mask.as_ref());
    let failed = |what: &str| op_failed(what, &all);
    // The f32 error of the softmax chain gets 4x the accumulation bound; a 16-bit result is
    // that f32 result rounded once, so it gets one 16-bit ulp on top, as a 16-bit matmul does
    // (no intermediate of the forward or backward pass is rounded to 16 bits).
    let terms = s + e + ev + 4;
    let f32_tol = Tolerance::accumulation(dtype.compute_dtype(), terms).scaled(4.0);
    let tol = if dtype.is_half() {
        Tolerance::sixteen_bit(dtype, f32_tol)
    } else {
        f32_tol
    };
    let forward = q
        .scaled_dot_product_attention_with_lse(&k, &v, &options)
        .map_err(failed(AttentionOp::Forward.name()))?;
    let unflat = |x: &RefArray, dims: Vec<usize>| RefArray::new(dims, x.data.clone());
    match case.op {
        AttentionOp::Forward => {
            let want = reference.forward();
            let out_dims = with(&case.batch, l, ev);
            let lse_dims = [case.batch.clone(), vec![l]].concat();
            assert_close_scaled(
                &forward.out,
                dtype,
                &unflat(&want.out, out_dims.clone()),
                &unflat(&want.out_scale, out_dims),
                tol,
            )
            .map_err(|e| format!("output: {e}"))
            .map_err(with_inputs(&all))?;
            // The log-sum-exp is in the compute dtype: f32 for 16-bit inputs.
            let lse_dtype = dtype.compute_dtype();
            let lse_tol = Tolerance::accumulation(lse_dtype, s + e + ev + 4).scaled(4.0);
            assert_close_scaled(
                &forward.logsumexp,
                lse_dtype,
                &unflat(&want.lse, lse_dims.clone()),
                &unflat(&want.lse_scale, lse_dims),
                lse_tol,
            )
            .map_err(|e| format!("log-sum-exp: {e}"))
            .map_err(with_inputs(&all))
        }
        AttentionOp::Backward => {
            let grad_case = case
                .grad
                .as_ref()
                .ok_or("a backward case needs a gradient")?;
            let g = build(dev, grad_case, "upstream gradient")?;
            let grads = g
                .scaled_dot_product_attention_backward(&q, &k, &v, &options, &forward)
                .map_err(failed(AttentionOp::Backward.name()))?;
            let want = reference.backward(&flat(&grad_case.reference(), nb));
            let dims = [
                with(&case.batch, l, e),
                with(&case.batch, s, e),
                with(&case.batch, s, ev),
            ];
            for (n, (got, name)) in [(&grads.q, "dq"), (&grads.k, "dk"), (&grads.v, "dv")]
                .into_iter()
                .enumerate()
            {
                assert_close_scaled(
                    got,
                    dtype,
                    &unflat(&want.grads[n], dims[n].clone()),
                    &unflat(&want.scales[n], dims[n].clone()),
                    tol,
                )
                .map_err(|e| format!("{name}: {e}"))
                .map_err(with_inputs(&all))?;
            }
            Ok(())
        }
    }
}

/// Checks `op` on `dtype`: the systematic [`patterns`], then 256 random cases.
pub fn run<B: Backend>(dev: &B, op: AttentionOp, dtype: DType) {
    check_property_systematic(
        &format!("{} {dtype}", op.name()),
        patterns(op, dtype),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
