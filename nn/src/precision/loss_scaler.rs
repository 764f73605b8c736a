//! [`DynamicLossScaler`]: loss scaling for f16 training (PyTorch's `GradScaler`).

use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result};

/// What [`DynamicLossScaler::unscale_and_update`] decided for one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalerStep {
    /// The gradients were finite and are unscaled: take the optimizer step.
    Apply,
    /// A gradient held inf or NaN: skip the optimizer step (the gradients are cleared) and
    /// continue with the smaller scale.
    Skip,
}

/// Multiplies the loss by a scale before `backward` so that small f16 gradients do not flush to
/// zero, divides the gradients by it again, skips steps whose gradients overflowed (halving the
/// scale) and doubles the scale after `growth_interval` finite steps in a row.
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::precision::{DynamicLossScaler, ScalerStep};
/// let mut scaler = DynamicLossScaler::new().init_scale(1024.0);
/// assert_eq!(scaler.scale(), 1024.0);
/// // Per step: scaler.scale_loss(&loss)?.backward()?; then
/// // if scaler.unscale_and_update(&params)? == ScalerStep::Apply { optimizer.step()?; }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DynamicLossScaler {
    scale: f64,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: usize,
    finite_steps: usize,
}

impl Default for DynamicLossScaler {
    fn default() -> Self {
        DynamicLossScaler::new()
    }
}

impl DynamicLossScaler {
    /// PyTorch's defaults: scale `2^16`, growth `x2` every 2000 finite steps, backoff `x0.5`.
    pub fn new() -> Self {
        DynamicLossScaler {
            scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            finite_steps: 0,
        }
    }

    /// Starts from `scale` instead of `2^16`.
    pub fn init_scale(mut self, scale: f64) -> Self {
        self.scale = scale;
        self
    }

    /// Grows after `steps` finite steps in a row instead of 2000.
    pub fn growth_interval(mut self, steps: usize) -> Self {
        self.growth_interval = steps.max(1);
        self
    }

    /// The current scale.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// `loss * scale`, to call `backward` on.
    pub fn scale_loss<B: Backend>(&self, loss: &Var<B>) -> Result<Var<B>> {
        loss.mul_scalar(self.scale)
    }

    /// Divides the gradient of every parameter by the scale; returns whether any gradient
    /// holds inf or NaN (checked before unscaling, on the scaled values).
    pub fn unscale<B: Backend>(&self, params: &[Var<B>]) -> Result<bool> {
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err(Error::InvalidArgument {
                op: "DynamicLossScaler::unscale",
                msg: format!("the scale must be positive and finite, not {}", self.scale),
            });
        }
        let mut found_non_finite = false;
        for p in params {
            let Some(g) = p.grad() else { continue };
            let finite = g.to_vec_f64()?.iter().all(|x| x.is_finite());
            found_non_finite |= !finite;
            p.set_grad(Some(g.div_scalar(self.scale)?));
        }
        Ok(found_non_finite)
    }

    /// The scale after a step with (`true`) or without overflowing gradients: backoff and a
    /// fresh count on overflow, growth after `growth_interval` finite steps in a row.
    pub fn update(&mut self, found_non_finite: bool) {
        if found_non_finite {
            self.scale *= self.backoff_factor;
            self.finite_steps = 0;
        } else {
            self.finite_steps += 1;
            if self.finite_steps >= self.growth_interval {
                self.scale *= self.growth_factor;
                self.finite_steps = 0;
            }
        }
    }

    /// [`Self::unscale`] then [`Self::update`]; on overflow the gradients are cleared so that an
    /// optimizer step taken anyway changes nothing.
    pub fn unscale_and_update<B: Backend>(&mut self, params: &[Var<B>]) -> Result<ScalerStep> {
        let found = self.unscale(params)?;
        self.update(found);
        if found {
            for p in params {
                p.set_grad(None);
            }
            Ok(ScalerStep::Skip)
        } else {
            Ok(ScalerStep::Apply)
        }
    }
}
