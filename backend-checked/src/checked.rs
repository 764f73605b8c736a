//! [`Checked`]: a backend that runs every op on a backend under test and on a reference.

use tessera_core::Backend;

/// A backend that runs every op on `B` (the backend under test) and on `R` (the reference),
/// compares the results, and returns a typed [`tessera_core::Error::Divergence`] (op name, input
/// shapes, max error, first element out of tolerance) at the first disagreement.
///
/// Use it to debug a new backend on a real workload: `Checked<MyGpu, Cpu>` trains a model like
/// `MyGpu` would, only slower, and stops at the first op that computes something the CPU does
/// not. After each op the reference's copy of the result is overwritten with the values of the
/// backend under test, so every op is checked on identical inputs and rounding differences never
/// accumulate into false alarms.
///
/// Tolerances (see [`Tolerance`](crate::Tolerance)): exact for results that are one of the inputs or defined bit
/// for bit (copies, casts, comparisons, select, max/min, arg-reductions, indexing, random draws,
/// neg/abs/sign/relu/floor/ceil, max pooling, `relu_backward`); simple for correctly rounded
/// arithmetic (add, sub, mul, div, square, recip, sqrt, in-place accumulation); transcendental
/// for exp, log, sin, cos, tanh, sigmoid, gelu, erf, pow and the softmax family; accumulation
/// (scaled by the magnitude `op(|inputs|)`, computed on the reference) for sum, prod, matmul,
/// scatter_add, convolutions, pooling gradients, average pooling and the Adam step.
/// [`Checked::with_tolerance_factor`] loosens them all.
///
/// ```
/// use tessera_checked::Checked;
/// use tessera_cpu::Cpu;
/// use tessera_core::{DType, Tensor};
/// # fn main() -> tessera_core::Result<()> {
/// let dev = Checked::new(Cpu::new(), Cpu::new());
/// let a = Tensor::randn([3, 4], DType::F32, 0, &dev)?;
/// let b = a.t()?.matmul(&a)?.softmax(-1)?; // every op ran twice and agreed
/// assert_eq!(b.dims(), &[4, 4]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Checked<B: Backend, R: Backend> {
    pub(crate) under_test: B,
    pub(crate) reference: R,
    pub(crate) tolerance_factor: f64,
}

impl<B: Backend, R: Backend> Checked<B, R> {
    /// Checks `under_test` against `reference` with the default tolerances.
    pub fn new(under_test: B, reference: R) -> Self {
        Checked {
            under_test,
            reference,
            tolerance_factor: 1.0,
        }
    }

    /// The same checker with every float tolerance multiplied by `factor` (> 1 loosens).
    pub fn with_tolerance_factor(self, factor: f64) -> Self {
        Checked {
            tolerance_factor: factor,
            ..self
        }
    }

    /// The backend under test.
    pub fn under_test(&self) -> &B {
        &self.under_test
    }

    /// The reference backend.
    pub fn reference(&self) -> &R {
        &self.reference
    }
}
