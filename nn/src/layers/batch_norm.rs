//! Batch normalisation: [`BatchNorm1d`] over `[n, c]` / `[n, c, l]` and [`BatchNorm2d`] over
//! `[n, c, h, w]`, sharing one implementation.

use crate::module::{Forward, TrainingMode};
use crate::{Config, Module};
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, DType, Error, Result, Tensor};

/// The hyper-parameters of a batch-norm layer (PyTorch's `nn.BatchNorm1d` / `nn.BatchNorm2d`
/// arguments and defaults).
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::layers::BatchNormConfig;
/// let bn = BatchNormConfig::new(32).momentum(None).init_2d(&tessera_cpu::Cpu::new())?;
/// assert_eq!(bn.running_mean().dims(), &[32]);
/// # Ok(()) }
/// ```
#[derive(Config, Clone, Copy, Debug, PartialEq)]
pub struct BatchNormConfig {
    /// The number of channels `c` (axis 1 of the input).
    pub num_features: usize,
    /// Added to the variance before the square root.
    #[config(default = 1e-5)]
    pub eps: f64,
    /// Weight of the new batch statistic in the running averages; `None` makes them
    /// cumulative averages over all batches seen, like PyTorch.
    #[config(default = Some(0.1))]
    pub momentum: Option<f64>,
    /// Whether the layer has a learned per-channel scale `weight` and shift `bias`.
    #[config(default = true)]
    pub affine: bool,
    /// The dtype of the parameters and running statistics.
    #[config(default = DType::F32)]
    pub dtype: DType,
}

impl BatchNormConfig {
    /// A [`BatchNorm1d`] on `backend`.
    pub fn init_1d<B: Backend>(&self, backend: &B) -> Result<BatchNorm1d<B>> {
        Ok(BatchNorm1d {
            core: BatchNormCore::new("BatchNorm1d", *self, backend)?,
        })
    }

    /// A [`BatchNorm2d`] on `backend`.
    pub fn init_2d<B: Backend>(&self, backend: &B) -> Result<BatchNorm2d<B>> {
        Ok(BatchNorm2d {
            core: BatchNormCore::new("BatchNorm2d", *self, backend)?,
        })
    }
}

/// The state and maths shared by the batch-norm layers.
///
/// Training: normalise with the batch mean and the *biased* batch variance over every axis but
/// the channel axis 1, then update `running_mean` and `running_var` (the latter with the
/// *unbiased* batch variance) as `(1 - m) · running + m · batch`. Evaluation: normalise with
/// the running statistics. Then `y = x̂ · weight + bias` per channel.
#[derive(Module)]
struct BatchNormCore<B: Backend> {
    #[module(skip)]
    op: &'static str,
    #[module(skip)]
    num_features: usize,
    #[module(skip)]
    config: BatchNormConfig,
    weight: Option<Var<B>>,
    bias: Option<Var<B>>,
    #[module(buffer)]
    running_mean: Var<B>,
    #[module(buffer)]
    running_var: Var<B>,
    #[module(buffer)]
    num_batches_tracked: Var<B>,
    mode: TrainingMode,
}

impl<B: Backend> BatchNormCore<B> {
    fn new(op: &'static str, config: BatchNormConfig, backend: &B) -> Result<Self> {
        let (num_features, dtype) = (config.num_features, config.dtype);
        if !(config.eps.is_finite() && config.eps > 0.0) {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("eps must be positive, got {}", config.eps),
            });
        }
        if let Some(m) = config.momentum {
            if !(0.0..=1.0).contains(&m) {
                return Err(Error::InvalidArgument {
                    op,
                    msg: format!("momentum must be in [0, 1], got {m}"),
                });
            }
        }
        if !dtype.is_float() {
            return Err(Error::UnsupportedDType { op, dtype });
        }
        if num_features == 0 {
            return Err(Error::InvalidArgument {
                op,
                msg: "num_features must be at least 1".into(),
            });
        }
        let (weight, bias) = if config.affine {
            (
                Some(Var::param(Tensor::ones([num_features], dtype, backend)?)),
                Some(Var::param(Tensor::zeros([num_features], dtype, backend)?)),
            )
        } else {
            (None, None)
        };
        Ok(BatchNormCore {
            op,
            num_features,
            config,
            weight,
            bias,
            running_mean: Var::constant(Tensor::zeros([num_features], dtype, backend)?),
            running_var: Var::constant(Tensor::ones([num_features], dtype, backend)?),
            num_batches_tracked: Var::constant(Tensor::zeros((), DType::I64, backend)?),
            mode: TrainingMode::new(),
        })
    }

    /// Checks the input rank and channel count.
    fn check_input(&self, dims: &[usize], ranks: &[usize]) -> Result<()> {
        if !ranks.contains(&dims.len()) || dims[1] != self.num_features {
            return Err(Error::InvalidArgument {
                op: self.op,
                msg: format!(
                    "expected an input of rank {ranks:?} with {} channels on axis 1, got shape {:?}",
                    self.num_features, dims
                ),
            });
        }
        Ok(())
    }

    /// `[1, c, 1, ...]` for an input of rank `rank`: per-channel values broadcast against it.
    fn channel_shape(&self, rank: usize) -> Vec<usize> {
        let mut shape = vec![1; rank];
        shape[1] = self.num_features;
        shape
    }

    fn forward(&self, x: &Var<B>, ranks: &[usize]) -> Result<Var<B>> {
        let dims = x.dims().to_vec();
        self.check_input(&dims, ranks)?;
        let channel_shape = self.channel_shape(dims.len());
        let axes: Vec<isize> = (0..dims.len() as isize).filter(|&a| a != 1).collect();
        let normalized = if self.mode.get() {
            let count: usize = dims.iter().product::<usize>() / self.num_features;
            if count <= 1 {
                return Err(Error::InvalidArgument {
                    op: self.op,
                    msg: format!(
                        "training needs more than one value per channel, got input shape {dims:?}"
                    ),
                });
            }
            let mean = x.mean(&axes, true)?;
            let var = x.var(&axes, 0, true)?;
            self.update_running_stats(&mean.value(), &var.value(), count)?;
            x.sub(&mean)?
                .mul(&var.add_scalar(self.config.eps)?.rsqrt()?)?
        } else {
            let mean = self.running_mean.value().reshape(channel_shape.clone())?;
            let inv_std = self
                .running_var
                .value()
                .add_scalar(self.config.eps)?
                .rsqrt()?
                .reshape(channel_shape.clone())?;
            x.sub(&Var::constant(mean))?.mul(&Var::constant(inv_std))?
        };
        let mut y = normalized;
        if let Some(w) = &self.weight {
            y = y.mul(&w.reshape(channel_shape.clone())?)?;
        }
        if let Some(b) = &self.bias {
            y = y.add(&b.reshape(channel_shape)?)?;
        }
        Ok(y)
    }

    /// `running = (1 - m) · running + m · batch`, with the unbiased variance
    /// `var · count / (count - 1)`; `m = 1 / batches seen` when momentum is `None`.
    fn update_running_stats(
        &self,
        batch_mean: &Tensor<B>,
        batch_var: &Tensor<B>,
        count: usize,
    ) -> Result<()> {
        no_grad(|| {
            let tracked = self.num_batches_tracked.value().add_scalar(1.0)?;
            let momentum = match self.config.momentum {
                Some(m) => m,
                None => 1.0 / tracked.to_scalar_f64()?,
            };
            let c = [self.num_features];
            let batch_mean = batch_mean.reshape(c)?;
            let unbiased = batch_var
                .reshape(c)?
                .mul_scalar(count as f64 / (count - 1) as f64)?;
            let blend = |running: &Var<B>, batch: &Tensor<B>| -> Result<()> {
                let old = running.value().mul_scalar(1.0 - momentum)?;
                running.set_value(old.add(&batch.mul_scalar(momentum)?)?)
            };
            blend(&self.running_mean, &batch_mean)?;
            blend(&self.running_var, &unbiased)?;
            self.num_batches_tracked.set_value(tracked)
        })
    }
}

/// Defines a public batch-norm layer over `BatchNormCore` accepting inputs of `$ranks`.
macro_rules! batch_norm_layer {
    ($(#[$doc:meta])* $name:ident, $op:literal, $ranks:expr) => {
        $(#[$doc])*
        #[derive(Module)]
        pub struct $name<B: Backend> {
            #[module(flatten)]
            core: BatchNormCore<B>,
        }

        impl<B: Backend> $name<B> {
            /// The per-channel scale, if affine.
            pub fn weight(&self) -> Option<&Var<B>> {
                self.core.weight.as_ref()
            }

            /// The per-channel shift, if affine.
            pub fn bias(&self) -> Option<&Var<B>> {
                self.core.bias.as_ref()
            }

            /// The running mean `[c]` used in evaluation mode.
            pub fn running_mean(&self) -> &Var<B> {
                &self.core.running_mean
            }

            /// The running (unbiased) variance `[c]` used in evaluation mode.
            pub fn running_var(&self) -> &Var<B> {
                &self.core.running_var
            }

            /// The number of training batches seen (an `i64` scalar).
            pub fn num_batches_tracked(&self) -> &Var<B> {
                &self.core.num_batches_tracked
            }

            /// The hyper-parameters.
            pub fn config(&self) -> BatchNormConfig {
                self.core.config
            }
        }

        impl<B: Backend> Forward<B> for $name<B> {
            fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
                self.core.forward(x, &$ranks)
            }
        }
    };
}

batch_norm_layer!(
    /// Batch normalisation over `[n, c]` or `[n, c, l]` inputs (PyTorch's `nn.BatchNorm1d`):
    /// statistics per channel `c` over the batch (and length) axes. Parameters: `weight`,
    /// `bias`; buffers: `running_mean`, `running_var`, `num_batches_tracked`.
    BatchNorm1d,
    "BatchNorm1d",
    [2, 3]
);

batch_norm_layer!(
    /// Batch normalisation over `[n, c, h, w]` inputs (PyTorch's `nn.BatchNorm2d`): statistics
    /// per channel `c` over the batch and spatial axes. Parameters: `weight`, `bias`; buffers:
    /// `running_mean`, `running_var`, `num_batches_tracked`.
    BatchNorm2d,
    "BatchNorm2d",
    [4]
);
