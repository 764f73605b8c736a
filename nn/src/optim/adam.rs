//! Adam, and the update core it shares with [`super::AdamW`].

use super::named_params::{check_hyper, collect_params, step_tensor, NamedParam, StateReader};
use super::Optimizer;
use tessera_autograd::{no_grad, Var};
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::{Backend, Result, Tensor};

/// The hyper-parameters of [`Adam`]; [`Default`] gives PyTorch's (`lr = 1e-3`,
/// `betas = (0.9, 0.999)`, `eps = 1e-8`, no weight decay, no AMSGrad).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamConfig {
    /// Learning rate.
    pub lr: f64,
    /// Decay rates `(β1, β2)` of the first and second moment estimates, each in `[0, 1)`.
    pub betas: (f64, f64),
    /// Added to the denominator for stability.
    pub eps: f64,
    /// L2 penalty `λ` added to the gradient (coupled weight decay).
    pub weight_decay: f64,
    /// Use the maximum of past second moments (AMSGrad).
    pub amsgrad: bool,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
        }
    }
}

impl AdamConfig {
    /// PyTorch's defaults with learning rate `lr`.
    pub fn new(lr: f64) -> Self {
        AdamConfig {
            lr,
            ..Self::default()
        }
    }
}

/// How weight decay enters the update.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum WeightDecay {
    /// Adam: `g ← g + λ·p` before the moments.
    Coupled,
    /// AdamW: `p ← p·(1 - lr·λ)` before the Adam step.
    Decoupled,
}

/// The moment estimates of one parameter.
struct Moments<B: Backend> {
    step: u64,
    step_tensor: Tensor<B>,
    exp_avg: Tensor<B>,
    exp_avg_sq: Tensor<B>,
    max_exp_avg_sq: Option<Tensor<B>>,
}

/// Adam/AdamW with PyTorch's exact update (`torch.optim.Adam` / `AdamW`, non-fused). For each
/// parameter `p` with gradient `g`, at its step `t = 1, 2, ...`:
///
/// ```text
/// p ← p·(1 - lr·λ)                   (AdamW)      g ← g + λ·p   (Adam, if λ ≠ 0)
/// m ← β1·m + (1 - β1)·g
/// v ← β2·v + (1 - β2)·g²
/// v̂ ← max(v̂, v) with AMSGrad, else v
/// p ← p - (lr / (1 - β1ᵗ)) · m / (√v̂ / √(1 - β2ᵗ) + eps)
/// ```
///
/// State per parameter: `step`, `exp_avg`, `exp_avg_sq`, and `max_exp_avg_sq` with AMSGrad.
pub(crate) struct AdamCore<B: Backend> {
    op: &'static str,
    pub(crate) config: AdamConfig,
    decay: WeightDecay,
    params: Vec<NamedParam<B>>,
    moments: Vec<Option<Moments<B>>>,
}

impl<B: Backend> AdamCore<B> {
    pub(crate) fn new(
        op: &'static str,
        params: impl IntoIterator<Item = (String, Var<B>)>,
        config: AdamConfig,
        decay: WeightDecay,
    ) -> Result<Self> {
        check_hyper(op, "learning rate", config.lr, 0.0, None)?;
        check_hyper(op, "beta1", config.betas.0, 0.0, Some(1.0))?;
        check_hyper(op, "beta2", config.betas.1, 0.0, Some(1.0))?;
        check_hyper(op, "eps", config.eps, 0.0, None)?;
        check_hyper(op, "weight decay", config.weight_decay, 0.0, None)?;
        let params = collect_params(op, params)?;
        let moments = params.iter().map(|_| None).collect();
        Ok(AdamCore {
            op,
            config,
            decay,
            params,
            moments,
        })
    }

    /// The new value of one parameter; advances its moments.
    fn update(
        config: &AdamConfig,
        decay: WeightDecay,
        value: &Tensor<B>,
        grad: &Tensor<B>,
        slot: &mut Option<Moments<B>>,
    ) -> Result<Tensor<B>> {
        let (beta1, beta2) = config.betas;
        let lambda = config.weight_decay;
        let state = match slot.take() {
            Some(state) => state,
            None => Moments {
                step: 0,
                step_tensor: step_tensor(0, value)?,
                exp_avg: value.zeros_like()?,
                exp_avg_sq: value.zeros_like()?,
                max_exp_avg_sq: if config.amsgrad {
                    Some(value.zeros_like()?)
                } else {
                    None
                },
            },
        };
        let step = state.step + 1;
        let update = AdamUpdate {
            beta1,
            beta2,
            step_size: config.lr / (1.0 - beta1.powf(step as f64)),
            bias_correction2_sqrt: (1.0 - beta2.powf(step as f64)).sqrt(),
            eps: config.eps,
            coupled_decay: match decay {
                WeightDecay::Coupled => lambda,
                WeightDecay::Decoupled => 0.0,
            },
            decoupled_factor: match decay {
                WeightDecay::Decoupled if lambda != 0.0 => 1.0 - config.lr * lambda,
                _ => 1.0,
            },
        };
        // One fused pass on backends that have it; the composite chain otherwise.
        let AdamTensors {
            param: updated,
            exp_avg,
            exp_avg_sq,
            max_exp_avg_sq,
        } = tessera_core::dispatch::adam_update(
            value,
            grad,
            (&state.exp_avg, &state.exp_avg_sq),
            state.max_exp_avg_sq.as_ref(),
            update,
        )?;
        *slot = Some(Moments {
            step,
            step_tensor: step_tensor(step, value)?,
            exp_avg,
            exp_avg_sq,
            max_exp_avg_sq,
        });
        Ok(updated)
    }
}

impl<B: Backend> Optimizer<B> for AdamCore<B> {
    fn step(&mut self) -> Result<()> {
        let (config, decay) = (self.config, self.decay);
        no_grad(|| {
            for (param, slot) in self.params.iter().zip(&mut self.moments) {
                let Some(grad) = param.var.grad() else {
                    continue;
                };
                let updated = Self::update(&config, decay, &param.var.value(), &grad, slot)?;
                param.var.set_value(updated)?;
            }
            Ok(())
        })
    }

    fn zero_grad(&mut self) {
        for param in &self.params {
            param.var.zero_grad();
        }
    }

    fn learning_rate(&self) -> f64 {
        self.config.lr
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.config.lr = lr;
    }

    fn state(&self) -> Vec<(String, Tensor<B>)> {
        let mut out = Vec::new();
        for (param, slot) in self.params.iter().zip(&self.moments) {
            let Some(m) = slot else { continue };
            let key = |k: &str| format!("{}.{k}", param.name);
            out.push((key("step"), m.step_tensor.clone()));
            out.push((key("exp_avg"), m.exp_avg.clone()));
            out.push((key("exp_avg_sq"), m.exp_avg_sq.clone()));
            if let Some(max) = &m.max_exp_avg_sq {
                out.push((key("max_exp_avg_sq"), max.clone()));
            }
        }
        out
    }

    fn load_state(&mut self, state: &[(String, Tensor<B>)]) -> Result<()> {
        let mut reader = StateReader::new(self.op, state)?;
        let mut moments = Vec::with_capacity(self.params.len());
        for param in &self.params {
            if !reader.has_any(&param.name) {
                moments.push(None);
                continue;
            }
            let name = &param.name;
            let like = param.var.value();
            let step = reader.take_step(name)?;
            let max_exp_avg_sq = if self.config.amsgrad {
                Some(reader.take_like(name, "max_exp_avg_sq", &like)?)
            } else {
                None
            };
            moments.push(Some(Moments {
                step,
                step_tensor: step_tensor(step, &like)?,
                exp_avg: reader.take_like(name, "exp_avg", &like)?,
                exp_avg_sq: reader.take_like(name, "exp_avg_sq", &like)?,
                max_exp_avg_sq,
            }));
        }
        reader.finish()?;
        self.moments = moments;
        Ok(())
    }
}

/// Adam (`torch.optim.Adam`): adaptive moment estimation with bias correction and coupled
/// (L2) weight decay; see [`AdamConfig`] for the hyper-parameters. The update, per parameter
/// `p` with gradient `g` at its step `t`:
///
/// ```text
/// g ← g + λ·p                       (if λ ≠ 0)
/// m ← β1·m + (1 - β1)·g,  v ← β2·v + (1 - β2)·g²,  v̂ ← max(v̂, v) with AMSGrad else v
/// p ← p - (lr / (1 - β1ᵗ)) · m / (√v̂ / √(1 - β2ᵗ) + eps)
/// ```
///
/// State per parameter: `step`, `exp_avg`, `exp_avg_sq` (and `max_exp_avg_sq` with AMSGrad).
pub struct Adam<B: Backend> {
    core: AdamCore<B>,
}

impl<B: Backend> Adam<B> {
    /// An optimizer over named `params` (e.g. `model.parameters()`).
    pub fn new(
        params: impl IntoIterator<Item = (String, Var<B>)>,
        config: AdamConfig,
    ) -> Result<Self> {
        Ok(Adam {
            core: AdamCore::new("Adam", params, config, WeightDecay::Coupled)?,
        })
    }

    /// The hyper-parameters (with the current learning rate).
    pub fn config(&self) -> AdamConfig {
        self.core.config
    }
}

impl<B: Backend> Optimizer<B> for Adam<B> {
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
