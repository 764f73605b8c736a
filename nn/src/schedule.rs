//! Learning-rate schedules: pure functions from the step index to a learning rate, with
//! PyTorch's formulas ([`StepLr`], [`CosineAnnealing`]) and a [`LinearWarmup`] wrapper.
//!
//! ```
//! use tessera_nn::schedule::{CosineAnnealing, LinearWarmup, LrSchedule};
//! let cosine = CosineAnnealing::new(0.1, 100, 0.0).unwrap();
//! let schedule = LinearWarmup::new(cosine, 10, 0.1).unwrap();
//! assert!((schedule.lr_at(0) - 0.01).abs() < 1e-12);   // 0.1 × start factor 0.1
//! assert!((schedule.lr_at(10) - 0.1).abs() < 1e-12);   // warm-up over: cosine at its step 0
//! ```
//!
//! Drive an optimizer with `optimizer.set_learning_rate(schedule.lr_at(step))` before each
//! step.

use tessera_core::{Error, Result};

/// A learning rate as a function of the (0-based) optimizer step.
pub trait LrSchedule {
    /// The learning rate to use for step `step`.
    fn lr_at(&self, step: usize) -> f64;
}

/// Errors unless `value` is finite and `>= 0`.
fn check_non_negative(op: &'static str, what: &str, value: f64) -> Result<()> {
    if !(value.is_finite() && value >= 0.0) {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("{what} must be finite and non-negative, got {value}"),
        });
    }
    Ok(())
}

/// Errors unless `value > 0`.
fn check_positive(op: &'static str, what: &str, value: usize) -> Result<()> {
    if value == 0 {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("{what} must be positive"),
        });
    }
    Ok(())
}

/// Decays by `gamma` every `step_size` steps (PyTorch's `StepLR`):
/// `lr = base_lr · gamma^⌊step / step_size⌋`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepLr {
    base_lr: f64,
    step_size: usize,
    gamma: f64,
}

impl StepLr {
    /// `base_lr` decayed by `gamma` every `step_size` (> 0) steps.
    pub fn new(base_lr: f64, step_size: usize, gamma: f64) -> Result<Self> {
        check_non_negative("StepLr", "base learning rate", base_lr)?;
        check_non_negative("StepLr", "gamma", gamma)?;
        check_positive("StepLr", "step size", step_size)?;
        Ok(StepLr {
            base_lr,
            step_size,
            gamma,
        })
    }
}

impl LrSchedule for StepLr {
    fn lr_at(&self, step: usize) -> f64 {
        let decays = (step / self.step_size).min(i32::MAX as usize) as i32;
        self.base_lr * self.gamma.powi(decays)
    }
}

/// Cosine annealing from `base_lr` to `eta_min` over `t_max` steps (PyTorch's
/// `CosineAnnealingLR`, closed form):
/// `lr = eta_min + (base_lr - eta_min) · (1 + cos(π · step / t_max)) / 2`.
///
/// As in PyTorch the curve is not clamped: past `t_max` it rises again (period `2·t_max`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CosineAnnealing {
    base_lr: f64,
    t_max: usize,
    eta_min: f64,
}

impl CosineAnnealing {
    /// Anneals `base_lr` to `eta_min` over `t_max` (> 0) steps.
    pub fn new(base_lr: f64, t_max: usize, eta_min: f64) -> Result<Self> {
        check_non_negative("CosineAnnealing", "base learning rate", base_lr)?;
        check_non_negative("CosineAnnealing", "eta_min", eta_min)?;
        check_positive("CosineAnnealing", "t_max", t_max)?;
        Ok(CosineAnnealing {
            base_lr,
            t_max,
            eta_min,
        })
    }
}

impl LrSchedule for CosineAnnealing {
    fn lr_at(&self, step: usize) -> f64 {
        let phase = std::f64::consts::PI * step as f64 / self.t_max as f64;
        self.eta_min + (self.base_lr - self.eta_min) * (1.0 + phase.cos()) / 2.0
    }
}

/// A linear warm-up in front of another schedule (PyTorch's `LinearLR` followed by the inner
/// schedule in a `SequentialLR`). For `step < warmup_steps` the rate is
/// `inner.lr_at(0) · (start_factor + (1 - start_factor) · step / warmup_steps)`; afterwards it
/// is `inner.lr_at(step - warmup_steps)`, so the inner schedule starts when the warm-up ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearWarmup<S> {
    inner: S,
    warmup_steps: usize,
    start_factor: f64,
}

impl<S: LrSchedule> LinearWarmup<S> {
    /// Warms up over `warmup_steps` steps from `start_factor` (in `[0, 1]`) times the inner
    /// schedule's first rate. Zero warm-up steps is the inner schedule itself.
    pub fn new(inner: S, warmup_steps: usize, start_factor: f64) -> Result<Self> {
        if !(0.0..=1.0).contains(&start_factor) {
            return Err(Error::InvalidArgument {
                op: "LinearWarmup",
                msg: format!("start factor must be in [0, 1], got {start_factor}"),
            });
        }
        Ok(LinearWarmup {
            inner,
            warmup_steps,
            start_factor,
        })
    }

    /// The wrapped schedule.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: LrSchedule> LrSchedule for LinearWarmup<S> {
    fn lr_at(&self, step: usize) -> f64 {
        if step >= self.warmup_steps {
            return self.inner.lr_at(step - self.warmup_steps);
        }
        let progress = step as f64 / self.warmup_steps as f64;
        self.inner.lr_at(0) * (self.start_factor + (1.0 - self.start_factor) * progress)
    }
}
