//! AdamW: Adam with decoupled weight decay.

use super::adam::{AdamConfig, AdamCore, WeightDecay};
use super::Optimizer;
use tessera_autograd::Var;
use tessera_core::{Backend, Result, Tensor};

/// The hyper-parameters of [`AdamW`]; [`Default`] gives PyTorch's (`lr = 1e-3`,
/// `betas = (0.9, 0.999)`, `eps = 1e-8`, `weight_decay = 0.01`, no AMSGrad).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWConfig {
    /// Learning rate.
    pub lr: f64,
    /// Decay rates `(β1, β2)` of the first and second moment estimates, each in `[0, 1)`.
    pub betas: (f64, f64),
    /// Added to the denominator for stability.
    pub eps: f64,
    /// Decoupled weight decay `λ`: each step first scales the parameter by `1 - lr·λ`.
    pub weight_decay: f64,
    /// Use the maximum of past second moments (AMSGrad).
    pub amsgrad: bool,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 1e-2,
            amsgrad: false,
        }
    }
}

impl AdamWConfig {
    /// PyTorch's defaults with learning rate `lr`.
    pub fn new(lr: f64) -> Self {
        AdamWConfig {
            lr,
            ..Self::default()
        }
    }
}

impl From<AdamWConfig> for AdamConfig {
    fn from(c: AdamWConfig) -> Self {
        AdamConfig {
            lr: c.lr,
            betas: c.betas,
            eps: c.eps,
            weight_decay: c.weight_decay,
            amsgrad: c.amsgrad,
        }
    }
}

/// AdamW (`torch.optim.AdamW`): [`super::Adam`] whose weight decay is decoupled from the
/// gradient. Per parameter `p` with gradient `g` at its step `t`:
///
/// ```text
/// p ← p·(1 - lr·λ)
/// m ← β1·m + (1 - β1)·g,  v ← β2·v + (1 - β2)·g²,  v̂ ← max(v̂, v) with AMSGrad else v
/// p ← p - (lr / (1 - β1ᵗ)) · m / (√v̂ / √(1 - β2ᵗ) + eps)
/// ```
///
/// State per parameter: `step`, `exp_avg`, `exp_avg_sq` (and `max_exp_avg_sq` with AMSGrad).
pub struct AdamW<B: Backend> {
    core: AdamCore<B>,
}

impl<B: Backend> AdamW<B> {
    /// An optimizer over named `params` (e.g. `model.parameters()`).
    pub fn new(
        params: impl IntoIterator<Item = (String, Var<B>)>,
        config: AdamWConfig,
    ) -> Result<Self> {
        Ok(AdamW {
            core: AdamCore::new("AdamW", params, config.into(), WeightDecay::Decoupled)?,
        })
    }

    /// The hyper-parameters (with the current learning rate).
    pub fn config(&self) -> AdamWConfig {
        let c = self.core.config;
        AdamWConfig {
            lr: c.lr,
            betas: c.betas,
            eps: c.eps,
            weight_decay: c.weight_decay,
            amsgrad: c.amsgrad,
        }
    }
}

impl<B: Backend> Optimizer<B> for AdamW<B> {
    fn step(&mut self) -> Result<()> {
        self.core.step()
    }

    fn zero_grad(&mut self) {
        self.core.zero_grad();
    }

    fn learning_rate(&self) -> f64 {
        self.core.learning_rate()
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.core.set_learning_rate(lr);
    }

    fn state(&self) -> Vec<(String, Tensor<B>)> {
        self.core.state()
    }

    fn load_state(&mut self, state: &[(String, Tensor<B>)]) -> Result<()> {
        self.core.load_state(state)
    }
}
