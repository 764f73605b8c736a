//! Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay.

use super::named_params::{check_hyper, collect_params, NamedParam, StateReader};
use super::Optimizer;
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, Error, Result, Tensor};

/// The hyper-parameters of [`Sgd`]; [`SgdConfig::new`] gives PyTorch's defaults for a learning
/// rate (no momentum, no dampening, no Nesterov, no weight decay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdConfig {
    /// Learning rate.
    pub lr: f64,
    /// Momentum factor `μ` (0 disables the momentum buffer).
    pub momentum: f64,
    /// Dampening `τ` of the gradient added to the momentum buffer.
    pub dampening: f64,
    /// L2 penalty `λ` added to the gradient.
    pub weight_decay: f64,
    /// Nesterov momentum (needs `momentum > 0` and `dampening = 0`).
    pub nesterov: bool,
}

impl SgdConfig {
    /// Plain SGD with learning rate `lr`.
    pub fn new(lr: f64) -> Self {
        SgdConfig {
            lr,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
        }
    }

    /// The same configuration with momentum `μ`.
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.momentum = momentum;
        self
    }

    /// The same configuration with dampening `τ`.
    pub fn dampening(mut self, dampening: f64) -> Self {
        self.dampening = dampening;
        self
    }

    /// The same configuration with weight decay `λ`.
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// The same configuration with or without Nesterov momentum.
    pub fn nesterov(mut self, nesterov: bool) -> Self {
        self.nesterov = nesterov;
        self
    }
}

/// SGD with PyTorch's exact update (`torch.optim.SGD`). For each parameter `p` with gradient
/// `g`:
///
/// ```text
/// g ← g + λ·p                                     (if λ ≠ 0)
/// b ← g on the first step, else μ·b + (1 - τ)·g   (if μ ≠ 0)
/// g ← g + μ·b if Nesterov, else b                 (if μ ≠ 0)
/// p ← p - lr·g
/// ```
///
/// State per parameter: `momentum_buffer` (only with momentum).
pub struct Sgd<B: Backend> {
    config: SgdConfig,
    params: Vec<NamedParam<B>>,
    momentum_buffers: Vec<Option<Tensor<B>>>,
}

impl<B: Backend> Sgd<B> {
    /// An optimizer over named `params` (e.g. `model.parameters()`).
    pub fn new(
        params: impl IntoIterator<Item = (String, Var<B>)>,
        config: SgdConfig,
    ) -> Result<Self> {
        const OP: &str = "Sgd";
        check_hyper(OP, "learning rate", config.lr, 0.0, None)?;
        check_hyper(OP, "momentum", config.momentum, 0.0, None)?;
        check_hyper(OP, "dampening", config.dampening, 0.0, None)?;
        check_hyper(OP, "weight decay", config.weight_decay, 0.0, None)?;
        if config.nesterov && (config.momentum <= 0.0 || config.dampening != 0.0) {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: "Nesterov momentum requires a momentum and zero dampening".into(),
            });
        }
        let params = collect_params(OP, params)?;
        let momentum_buffers = params.iter().map(|_| None).collect();
        Ok(Sgd {
            config,
            params,
            momentum_buffers,
        })
    }

    /// The hyper-parameters (with the current learning rate).
    pub fn config(&self) -> SgdConfig {
        self.config
    }

    /// The new value of one parameter; updates its momentum buffer.
    fn update(
        config: &SgdConfig,
        value: &Tensor<B>,
        grad: &Tensor<B>,
        buffer: &mut Option<Tensor<B>>,
    ) -> Result<Tensor<B>> {
        let mut g = grad.clone();
        if config.weight_decay != 0.0 {
            g = g.add(&value.mul_scalar(config.weight_decay)?)?;
        }
        if config.momentum != 0.0 {
            let b = match buffer.take() {
                None => g.clone(),
                Some(b) => b
                    .mul_scalar(config.momentum)?
                    .add(&g.mul_scalar(1.0 - config.dampening)?)?,
            };
            g = if config.nesterov {
                g.add(&b.mul_scalar(config.momentum)?)?
            } else {
                b.clone()
            };
            *buffer = Some(b);
        }
        value.sub(&g.mul_scalar(config.lr)?)
    }
}

impl<B: Backend> Optimizer<B> for Sgd<B> {
    fn step(&mut self) -> Result<()> {
        let config = self.config;
        no_grad(|| {
            for (param, buffer) in self.params.iter().zip(&mut self.momentum_buffers) {
                let Some(grad) = param.var.grad() else {
                    continue;
                };
                let updated = Self::update(&config, &param.var.value(), &grad, buffer)?;
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
        self.params
            .iter()
            .zip(&self.momentum_buffers)
            .filter_map(|(param, buffer)| {
                let b = buffer.as_ref()?;
                Some((format!("{}.momentum_buffer", param.name), b.clone()))
            })
            .collect()
    }

    fn load_state(&mut self, state: &[(String, Tensor<B>)]) -> Result<()> {
        let mut reader = StateReader::new("Sgd::load_state", state)?;
        let mut buffers = Vec::with_capacity(self.params.len());
        for param in &self.params {
            buffers.push(if reader.has_any(&param.name) {
                let like = param.var.value();
                Some(reader.take_like(&param.name, "momentum_buffer", &like)?)
            } else {
                None
            });
        }
        reader.finish()?;
        self.momentum_buffers = buffers;
        Ok(())
    }
}
