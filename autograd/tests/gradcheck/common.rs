//! Shared helpers of the gradcheck property tests: input strategies (values kept away from the
//! kinks of the op under test, contiguous or not) and the check itself.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tessera_autograd::{gradcheck, GradcheckOptions, Var};
use tessera_core::{Result, Tensor};
use tessera_cpu::Cpu;

/// Cases per op: each case runs the op twice per input element.
pub const CASES: u32 = 64;

pub fn dev() -> Cpu {
    Cpu::new()
}

/// How an input tensor is laid out in memory.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    /// Row-major.
    Contiguous,
    /// All axes reversed over a row-major copy (non-contiguous for rank >= 2).
    Transposed,
    /// Every other row of a tensor twice as long on axis 0 (non-contiguous for rank >= 1).
    Strided,
}

/// The description of one f64 input: its logical values, dims and memory layout.
#[derive(Clone, Debug)]
pub struct Input {
    pub values: Vec<f64>,
    pub dims: Vec<usize>,
    pub layout: Layout,
}

impl Input {
    /// The tensor: `values` in row-major logical order, laid out as `layout` says.
    pub fn tensor(&self) -> Tensor<Cpu> {
        let dev = dev();
        let plain = Tensor::from_vec(self.values.clone(), self.dims.as_slice(), &dev).unwrap();
        match self.layout {
            Layout::Contiguous => plain,
            Layout::Transposed => {
                let reversed: Vec<usize> = (0..self.dims.len()).rev().collect();
                plain
                    .permute(&reversed)
                    .unwrap()
                    .contiguous()
                    .unwrap()
                    .permute(&reversed)
                    .unwrap()
            }
            Layout::Strided if self.dims.is_empty() => plain,
            Layout::Strided => {
                // Interleave each row along axis 0 with a filler row, then take every other row.
                let filler = plain.full_like(7.0).unwrap();
                let stacked = Tensor::stack(&[&plain, &filler], 1).unwrap();
                let mut big_dims = self.dims.clone();
                big_dims[0] *= 2;
                stacked
                    .reshape(big_dims)
                    .unwrap()
                    .slice(0, 0, 2 * self.dims[0], 2)
                    .unwrap()
            }
        }
    }
}

pub fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![
        Just(Layout::Contiguous),
        Just(Layout::Transposed),
        Just(Layout::Strided)
    ]
}

/// Dims of rank 0 to 3, each 1 to 3.
pub fn dims() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..=3, 0..=3)
}

/// Dims of rank 1 to 3, each 1 to 3.
pub fn dims_nonscalar() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..=3, 1..=3)
}

/// An input of the given dims with values drawn from `values`.
pub fn input_with(dims: Vec<usize>, values: BoxedStrategy<f64>) -> BoxedStrategy<Input> {
    let n: usize = dims.iter().product();
    (prop::collection::vec(values, n), layout())
        .prop_map(move |(values, layout)| Input {
            values,
            dims: dims.clone(),
            layout,
        })
        .boxed()
}

/// An input of random dims (rank 0 to 3) with values drawn from `values`.
pub fn input(values: BoxedStrategy<f64>) -> BoxedStrategy<Input> {
    dims()
        .prop_flat_map(move |d| input_with(d, values.clone()))
        .boxed()
}

/// An input of random dims (rank 1 to 3) with values drawn from `values`.
pub fn input_nonscalar(values: BoxedStrategy<f64>) -> BoxedStrategy<Input> {
    dims_nonscalar()
        .prop_flat_map(move |d| input_with(d, values.clone()))
        .boxed()
}

/// An input of the given dims whose values are pairwise at least 0.25 apart (no ties).
pub fn distinct_input_with(dims: Vec<usize>) -> BoxedStrategy<Input> {
    let n: usize = dims.iter().product();
    (Just((0..n).collect::<Vec<_>>()).prop_shuffle(), layout())
        .prop_map(move |(order, layout)| Input {
            values: order
                .iter()
                .map(|&k| k as f64 * 0.25 - n as f64 * 0.125)
                .collect(),
            dims: dims.clone(),
            layout,
        })
        .boxed()
}

/// Values uniform in `[lo, hi)`.
pub fn uniform(lo: f64, hi: f64) -> BoxedStrategy<f64> {
    (lo..hi).boxed()
}

/// Values with `lo <= |x| < hi`, of either sign.
pub fn away_from_zero(lo: f64, hi: f64) -> BoxedStrategy<f64> {
    (lo..hi, any::<bool>())
        .prop_map(|(m, negative)| if negative { -m } else { m })
        .boxed()
}

/// Dims of two operands that broadcast together: derived from one output shape by dropping
/// leading axes and setting axes to 1.
pub fn broadcast_dims() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    dims().prop_flat_map(|out| {
        let rank = out.len();
        let operand = move |out: Vec<usize>| {
            (0..=rank, prop::collection::vec(any::<bool>(), rank)).prop_map(
                move |(dropped, ones)| {
                    out.iter()
                        .zip(&ones)
                        .skip(dropped)
                        .map(|(&d, &one)| if one { 1 } else { d })
                        .collect::<Vec<_>>()
                },
            )
        };
        (operand(out.clone()), operand(out))
    })
}

/// Two inputs of broadcast-compatible shapes, values drawn from `lhs` and `rhs`.
pub fn broadcast_pair(
    lhs: BoxedStrategy<f64>,
    rhs: BoxedStrategy<f64>,
) -> BoxedStrategy<(Input, Input)> {
    broadcast_dims()
        .prop_flat_map(move |(a, b)| (input_with(a, lhs.clone()), input_with(b, rhs.clone())))
        .boxed()
}

/// Runs [`gradcheck`] with the default options and turns a failure into a test failure.
pub fn check(
    f: impl Fn(&[Var<Cpu>]) -> Result<Var<Cpu>>,
    inputs: &[&Input],
) -> std::result::Result<(), TestCaseError> {
    let tensors: Vec<Tensor<Cpu>> = inputs.iter().map(|i| i.tensor()).collect();
    match gradcheck(f, &tensors, GradcheckOptions::default()) {
        Ok(report) => {
            prop_assert_eq!(
                report.elements_checked,
                tensors.iter().map(|t| t.numel()).sum::<usize>()
            );
            Ok(())
        }
        Err(e) => Err(TestCaseError::fail(format!("{e} (inputs: {inputs:?})"))),
    }
}
