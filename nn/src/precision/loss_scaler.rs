//! [`DynamicLossScaler`]: loss scaling for f16 training (PyTorch's `GradScaler`).

use crate::distributed::{Communicator, Reduction};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Result, Tensor};

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

    /// Where the scaler stands: its scale and the finite steps counted towards its next
    /// growth (what a run checkpoint saves; see [`crate::run`]).
    pub fn position(&self) -> (f64, usize) {
        (self.scale, self.finite_steps)
    }

    /// Continues from a [`DynamicLossScaler::position`] read back from a checkpoint. Errors
    /// unless the scale is finite and positive.
    pub fn set_position(&mut self, scale: f64, finite_steps: usize) -> tessera_core::Result<()> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(tessera_core::Error::checkpoint(format!(
                "a loss scale must be finite and positive, got {scale}"
            )));
        }
        self.scale = scale;
        self.finite_steps = finite_steps;
        Ok(())
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
    ///
    /// The check runs on the device: `sum(g * 0)` is NaN exactly when `g` holds an inf or a
    /// NaN, the per-parameter sums are added there, and one scalar is read back, so a step
    /// waits for the device once, not once per parameter, and moves 8 bytes, not the gradients.
    pub fn unscale<B: Backend>(&self, params: &[Var<B>]) -> Result<bool> {
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err(Error::InvalidArgument {
                op: "DynamicLossScaler::unscale",
                msg: format!("the scale must be positive and finite, not {}", self.scale),
            });
        }
        let mut probe: Option<Tensor<B>> = None;
        for p in params {
            let Some(g) = p.grad() else { continue };
            let poisoned = g.mul_scalar(0.0)?.sum_all()?.to_dtype(DType::F64)?;
            probe = Some(match probe {
                None => poisoned,
                Some(acc) => acc.add(&poisoned)?,
            });
            p.set_grad(Some(g.div_scalar(self.scale)?));
        }
        match probe {
            None => Ok(false),
            Some(probe) => Ok(!probe.to_scalar_f64()?.is_finite()),
        }
    }

    /// [`Self::unscale`] on one rank of a data-parallel run: the ranks agree (one all-reduce of
    /// a flag) so that every rank skips, or takes, the same steps, whichever rank overflowed.
    pub fn unscale_across<B: Backend>(
        &self,
        params: &[Var<B>],
        comm: &dyn Communicator<B>,
    ) -> Result<bool> {
        let found = self.unscale(params)?;
        let mut flag = [if found { 1.0 } else { 0.0 }];
        comm.all_reduce_host(&mut flag, Reduction::Max)?;
        Ok(flag[0] > 0.0)
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
        Ok(self.decide(found, params))
    }

    /// [`Self::unscale_and_update`] with the ranks of `comm` agreeing
    /// ([`Self::unscale_across`]): every rank gets the same decision and the same next scale.
    pub fn unscale_and_update_across<B: Backend>(
        &mut self,
        params: &[Var<B>],
        comm: &dyn Communicator<B>,
    ) -> Result<ScalerStep> {
        let found = self.unscale_across(params, comm)?;
        Ok(self.decide(found, params))
    }

    fn decide<B: Backend>(&mut self, found: bool, params: &[Var<B>]) -> ScalerStep {
        self.update(found);
        if found {
            for p in params {
                p.set_grad(None);
            }
            ScalerStep::Skip
        } else {
            ScalerStep::Apply
        }
    }
}
