//! Softmax cross-entropy and its gradient under [`Checked`]: both sides run their own (fused
//! or default) implementation through tensor-core's dispatch, and the results are compared
//! with an accumulation tolerance over the row's length, scaled by the sizes of the terms.

use crate::composites::largest_finite_magnitude;
use crate::tolerance::Tolerance;
use crate::Checked;
use tessera_core::cross_entropy::{check_cross_entropy, check_cross_entropy_backward};
use tessera_core::{dispatch, Backend, DType, Result, Tensor};

impl<B: Backend, R: Backend> Checked<B, R> {
    pub(crate) fn checked_cross_entropy(
        &self,
        logits: &Tensor<Self>,
        targets: &Tensor<Self>,
        label_smoothing: f64,
    ) -> Result<Tensor<Self>> {
        let (_, c) = check_cross_entropy(logits, targets, label_smoothing)?;
        let ((xb, xr), (tb, tr)) = (self.split(logits)?, self.split(targets)?);
        let b = dispatch::cross_entropy(&xb, &tb, label_smoothing)?;
        let r = dispatch::cross_entropy(&xr, &tr, label_smoothing)?;
        // The loss is `ln Σ e^(x - m) + (1 - s)(m - x_t) - (s/c) Σ (x - m)`: each term is at
        // most `ln c` or twice the largest finite |x|.
        let largest = largest_finite_magnitude(&xr)?;
        let terms = 2.0 * largest + (c.max(1) as f64).ln() + 1.0;
        let magnitude = Tensor::full(r.shape().clone(), terms, DType::F64, self.reference())?;
        let tolerance = Tolerance::accumulation(logits.dtype(), 2 * c + 8);
        let inputs = [logits, targets];
        self.settle_tensors("cross_entropy", &inputs, tolerance, b, r, Some(magnitude))
    }

    pub(crate) fn checked_cross_entropy_backward(
        &self,
        logits: &Tensor<Self>,
        targets: &Tensor<Self>,
        grad: &Tensor<Self>,
        label_smoothing: f64,
    ) -> Result<Tensor<Self>> {
        let (n, c) = check_cross_entropy_backward(logits, targets, grad, label_smoothing)?;
        let ((xb, xr), (tb, tr)) = (self.split(logits)?, self.split(targets)?);
        let (gb, gr) = self.split(grad)?;
        let b = dispatch::cross_entropy_backward(&xb, &tb, &gb, label_smoothing)?;
        let r = dispatch::cross_entropy_backward(&xr, &tr, &gr, label_smoothing)?;
        // `grad · ((p - (1 - s)[j = t]) - s/c)`: the probabilities and the weights are at most
        // 1, and `p`'s rounding in the exponent, `p |x - m| ulp`, at most `ulp / e`.
        let magnitude = gr
            .to_dtype(DType::F64)?
            .abs()?
            .mul_scalar(2.0)?
            .reshape([n, 1])?
            .broadcast_to([n, c])?;
        let tolerance = Tolerance::accumulation(logits.dtype(), 2 * c + 8);
        let inputs = [logits, targets, grad];
        self.settle_tensors(
            "cross_entropy_backward",
            &inputs,
            tolerance,
            b,
            r,
            Some(magnitude),
        )
    }
}
