//! Layout recipes: how to build a tensor of a given logical shape whose layout is contiguous,
//! transposed, sliced (gaps, offsets, non-unit inner strides) or broadcast (zero strides), and
//! [`TensorCase`], a recipe plus its source values.
//!
//! A recipe is a contiguous *source* tensor and a list of view steps applied to it in order.
//! The same steps are applied to a [`RefArray`] by the reference views (index arithmetic), so the
//! logical values the op under test must see are known independently of the backend's strides.

use super::values::{values, ValueProfile};
use crate::reference::{numel, views, RefArray};
use proptest::prelude::*;
use tessera_core::{Backend, DType, Result, Tensor};

/// One view applied to the tensor built so far.
#[derive(Clone, Debug, PartialEq)]
pub enum ViewStep {
    /// `slice(axis, start, end, step)`.
    Slice {
        /// Axis sliced.
        axis: usize,
        /// First element kept.
        start: usize,
        /// Exclusive end.
        end: usize,
        /// Distance between kept elements.
        step: usize,
    },
    /// `permute(perm)`: output axis `i` is input axis `perm[i]`.
    Permute {
        /// The permutation.
        perm: Vec<usize>,
    },
    /// `broadcast_to(shape)`.
    Broadcast {
        /// Target shape.
        shape: Vec<usize>,
    },
}

impl ViewStep {
    /// The shape after this step, from the shape before it.
    fn output_shape(&self, input: &[usize]) -> Vec<usize> {
        match self {
            ViewStep::Slice {
                axis,
                start,
                end,
                step,
            } => {
                let mut s = input.to_vec();
                s[*axis] = (end - start).div_ceil(*step);
                s
            }
            ViewStep::Permute { perm } => perm.iter().map(|&p| input[p]).collect(),
            ViewStep::Broadcast { shape } => shape.clone(),
        }
    }

    fn apply_tensor<B: Backend>(&self, t: &Tensor<B>) -> Result<Tensor<B>> {
        match self {
            ViewStep::Slice {
                axis,
                start,
                end,
                step,
            } => t.slice(*axis as isize, *start, *end, *step),
            ViewStep::Permute { perm } => t.permute(perm),
            ViewStep::Broadcast { shape } => t.broadcast_to(shape.clone()),
        }
    }

    fn apply_ref(&self, x: &RefArray) -> RefArray {
        match self {
            ViewStep::Slice {
                axis,
                start,
                end,
                step,
            } => views::slice(x, *axis, *start, *end, *step),
            ViewStep::Permute { perm } => views::permute(x, perm),
            ViewStep::Broadcast { shape } => views::broadcast_to(x, shape),
        }
    }
}

/// A contiguous source shape and the view steps that turn it into the target layout.
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutRecipe {
    /// Shape of the contiguous tensor uploaded first.
    pub source_shape: Vec<usize>,
    /// Views applied in order.
    pub steps: Vec<ViewStep>,
}

impl LayoutRecipe {
    /// The plain contiguous layout of `shape`.
    pub fn contiguous(shape: Vec<usize>) -> Self {
        LayoutRecipe {
            source_shape: shape,
            steps: vec![],
        }
    }

    /// The logical shape the recipe produces.
    pub fn shape(&self) -> Vec<usize> {
        self.steps
            .iter()
            .fold(self.source_shape.clone(), |s, step| step.output_shape(&s))
    }

    /// Number of source values the recipe needs.
    pub fn source_numel(&self) -> usize {
        numel(&self.source_shape)
    }

    /// Uploads `source` (row-major values of `source_shape`) as `dtype` and applies the views.
    pub fn build<B: Backend>(&self, dev: &B, dtype: DType, source: &[f64]) -> Result<Tensor<B>> {
        let mut t = Tensor::from_f64_values(source, self.source_shape.clone(), dtype, dev)?;
        for step in &self.steps {
            t = step.apply_tensor(&t)?;
        }
        Ok(t)
    }

    /// The logical values the built tensor holds, computed by the reference views.
    pub fn apply_ref(&self, source: &[f64]) -> RefArray {
        let start = RefArray::new(self.source_shape.clone(), source.to_vec());
        self.steps.iter().fold(start, |x, step| step.apply_ref(&x))
    }
}

/// One view step that produces `target`, with the shape it must be applied to.
fn step_into(target: Vec<usize>) -> BoxedStrategy<(ViewStep, Vec<usize>)> {
    let rank = target.len();
    if rank == 0 {
        // Only broadcasting a scalar to a scalar is possible: keep it contiguous instead.
        return Just((ViewStep::Permute { perm: vec![] }, vec![])).boxed();
    }
    let t1 = target.clone();
    let slice = (0..rank, 0usize..=2, 1usize..=3, 0usize..=2).prop_map(
        move |(axis, start, step, extra)| {
            let len = t1[axis];
            let end = if len == 0 {
                start
            } else {
                start + (len - 1) * step + 1
            };
            let mut input = t1.clone();
            input[axis] = end + extra;
            (
                ViewStep::Slice {
                    axis,
                    start,
                    end,
                    step,
                },
                input,
            )
        },
    );
    let t2 = target.clone();
    let permute = Just((0..rank).collect::<Vec<usize>>())
        .prop_shuffle()
        .prop_map(move |perm| {
            // permute(perm) maps input axis perm[i] to output axis i.
            let mut input = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                input[p] = t2[i];
            }
            (ViewStep::Permute { perm }, input)
        });
    let t3 = target;
    let broadcast = super::shapes::broadcastable_to(t3.clone())
        .prop_map(move |input| (ViewStep::Broadcast { shape: t3.clone() }, input));
    prop_oneof![slice, permute, broadcast].boxed()
}

/// A recipe of exactly `depth` view steps producing `target`.
fn recipe_of_depth(target: Vec<usize>, depth: usize) -> BoxedStrategy<LayoutRecipe> {
    if depth == 0 {
        return Just(LayoutRecipe::contiguous(target)).boxed();
    }
    step_into(target)
        .prop_flat_map(move |(step, input)| {
            recipe_of_depth(input, depth - 1).prop_map(move |mut r| {
                r.steps.push(step.clone());
                r
            })
        })
        .boxed()
}

/// A recipe for `shape`: contiguous, or one or two views (transposed, sliced, broadcast) deep.
pub fn layout_recipe(shape: Vec<usize>) -> BoxedStrategy<LayoutRecipe> {
    prop_oneof![
        1 => recipe_of_depth(shape.clone(), 0),
        3 => recipe_of_depth(shape.clone(), 1),
        2 => recipe_of_depth(shape, 2),
    ]
    .boxed()
}

/// A tensor to build for a test: dtype, layout recipe and the source values.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorCase {
    /// Element type.
    pub dtype: DType,
    /// How the layout is made.
    pub recipe: LayoutRecipe,
    /// Row-major values of the contiguous source tensor.
    pub source: Vec<f64>,
}

impl TensorCase {
    /// A contiguous case holding `values` with `shape`.
    pub fn contiguous(dtype: DType, shape: Vec<usize>, values: Vec<f64>) -> Self {
        TensorCase {
            dtype,
            recipe: LayoutRecipe::contiguous(shape),
            source: values,
        }
    }

    /// The logical shape.
    pub fn shape(&self) -> Vec<usize> {
        self.recipe.shape()
    }

    /// Builds the tensor on `dev`.
    pub fn build<B: Backend>(&self, dev: &B) -> Result<Tensor<B>> {
        self.recipe.build(dev, self.dtype, &self.source)
    }

    /// The logical values of the tensor.
    pub fn reference(&self) -> RefArray {
        self.recipe.apply_ref(&self.source)
    }
}

/// A tensor of `dtype` and logical `shape` with a random layout and values from `profile`.
pub fn tensor_case(
    dtype: DType,
    shape: Vec<usize>,
    profile: ValueProfile,
) -> BoxedStrategy<TensorCase> {
    tensor_case_from(dtype, shape, super::values::value(dtype, profile))
}

/// A tensor of `dtype` and logical `shape` with a random layout, every source value drawn from
/// `value` (e.g. valid indices for an index tensor).
pub fn tensor_case_from(
    dtype: DType,
    shape: Vec<usize>,
    value: BoxedStrategy<f64>,
) -> BoxedStrategy<TensorCase> {
    layout_recipe(shape)
        .prop_flat_map(move |recipe| {
            let n = recipe.source_numel();
            prop::collection::vec(value.clone(), n).prop_map(move |source| TensorCase {
                dtype,
                recipe: recipe.clone(),
                source,
            })
        })
        .boxed()
}

/// A contiguous tensor of `dtype` and `shape` with values from `profile`.
pub fn contiguous_case(
    dtype: DType,
    shape: Vec<usize>,
    profile: ValueProfile,
) -> BoxedStrategy<TensorCase> {
    values(dtype, profile, numel(&shape))
        .prop_map(move |v| TensorCase::contiguous(dtype, shape.clone(), v))
        .boxed()
}
