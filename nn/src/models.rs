//! The two reference models of the `train` command and the benchmarks, as [`Sequential`]s whose
//! parameter names match the PyTorch peers' (`0.weight`, `0.bias`, `2.weight`, ...).

use crate::distributed::ShardedUnits;
use crate::layers::{
    Conv2d, Conv2dConfig, Flatten, Linear, LinearConfig, MaxPool2d, Pool2dConfig, ReLU, Sequential,
};
use crate::module::placeholder::check_blocks_runnable;
use crate::module::{Forward, ModuleVisitor, ToBackend};
use crate::precision::Precision;
use crate::Module;
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Generator, Result};

/// Which reference model to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    /// [`mlp`]: 784-512-512-10 with ReLU.
    Mlp,
    /// [`cnn`]: two conv + pool blocks and two linear layers.
    Cnn,
}

impl ModelKind {
    /// Builds the model for 28x28 grey images and 10 classes, initialised from `seed`.
    pub fn build<B: Backend>(
        self,
        dtype: DType,
        seed: u64,
        backend: &B,
    ) -> Result<ReferenceModel<B>> {
        self.build_with_precision(dtype, Precision::F32, seed, backend)
    }

    /// [`ModelKind::build`] with the linear and convolution layers computing under
    /// `precision` (parameters stay `dtype`).
    pub fn build_with_precision<B: Backend>(
        self,
        dtype: DType,
        precision: Precision,
        seed: u64,
        backend: &B,
    ) -> Result<ReferenceModel<B>> {
        Ok(match self {
            ModelKind::Mlp => {
                ReferenceModel::Mlp(mlp_with_precision(dtype, precision, seed, backend)?)
            }
            ModelKind::Cnn => ReferenceModel::Cnn(Box::new(cnn_with_precision(
                dtype, precision, seed, backend,
            )?)),
        })
    }

    /// [`ModelKind::build_with_precision`] without values: every layer's parameters are
    /// placeholders (one element each, [`Generator::deferred`]) until
    /// [`ModelKind::init_unit`] gives them, e.g. through
    /// [`ShardedUnits::initialize`], which shards each layer as soon as it has values, so that
    /// no rank holds the whole model at level 3. The values are the plain build's.
    ///
    /// ```
    /// use tessera_core::DType;
    /// use tessera_nn::{models::ModelKind, Module};
    /// # fn main() -> tessera_core::Result<()> {
    /// let (dev, kind) = (tessera_cpu::Cpu::new(), ModelKind::Mlp);
    /// let plain = kind.build(DType::F32, 7, &dev)?;
    /// let deferred = kind.build_deferred(DType::F32, Default::default(), 7, &dev)?;
    /// for unit in 0..deferred.unit_prefixes().len() {
    ///     kind.init_unit(&deferred, DType::F32, Default::default(), 7, unit)?;
    /// }
    /// for ((name, a), (_, b)) in plain.parameters().iter().zip(deferred.parameters()) {
    ///     assert_eq!(a.value().to_vec::<f32>()?, b.value().to_vec::<f32>()?, "{name}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn build_deferred<B: Backend>(
        self,
        dtype: DType,
        precision: Precision,
        seed: u64,
        backend: &B,
    ) -> Result<ReferenceModel<B>> {
        self.build_drawing(dtype, precision, seed, backend, &|_| false)
    }

    /// Gives unit `unit` ([`ReferenceModel::unit_prefixes`]) of `model`, a model of this kind
    /// built with the same `dtype`, `precision` and `seed` (e.g. by
    /// [`ModelKind::build_deferred`]), the values the plain build draws for it, building that
    /// layer alone.
    pub fn init_unit<B: Backend>(
        self,
        model: &impl Module<B>,
        dtype: DType,
        precision: Precision,
        seed: u64,
        unit: usize,
    ) -> Result<()> {
        let params = model.parameters();
        let backend = match params.first() {
            Some((_, var)) => var.value().backend().clone(),
            None => {
                return Err(Error::InvalidArgument {
                    op: "ModelKind::init_unit",
                    msg: format!("the model has no parameters (not a {self:?})"),
                })
            }
        };
        let layer = self.build_drawing(dtype, precision, seed, &backend, &|k| k == unit)?;
        let prefixes = layer.unit_prefixes();
        let Some(prefix) = prefixes.get(unit).map(|p| format!("{p}.")) else {
            return Err(Error::InvalidArgument {
                op: "ModelKind::init_unit",
                msg: format!("no unit {unit}: the {self:?} has {}", prefixes.len()),
            });
        };
        let values = layer.parameters();
        let targets: Vec<_> = params
            .iter()
            .filter(|(n, _)| n.starts_with(&prefix))
            .collect();
        if targets.is_empty() {
            return Err(Error::InvalidArgument {
                op: "ModelKind::init_unit",
                msg: format!("the model has no parameter under {prefix} (not a {self:?})"),
            });
        }
        for (name, var) in targets {
            match values.iter().find(|(n, _)| n == name) {
                Some((_, value)) => var.set_value(value.value())?,
                None => {
                    return Err(Error::InvalidArgument {
                        op: "ModelKind::init_unit",
                        msg: format!("the model's parameter {name} is not the {self:?}'s"),
                    })
                }
            }
        }
        Ok(())
    }

    /// The model with the values of the units `draws` accepts, placeholders elsewhere.
    fn build_drawing<B: Backend>(
        self,
        dtype: DType,
        precision: Precision,
        seed: u64,
        backend: &B,
        draws: &dyn Fn(usize) -> bool,
    ) -> Result<ReferenceModel<B>> {
        Ok(match self {
            ModelKind::Mlp => {
                ReferenceModel::Mlp(mlp_drawing(dtype, precision, seed, backend, draws)?)
            }
            ModelKind::Cnn => ReferenceModel::Cnn(Box::new(cnn_drawing(
                dtype, precision, seed, backend, draws,
            )?)),
        })
    }

    /// Input dims of one sample (without the batch axis): `[784]` or `[1, 28, 28]`.
    pub fn sample_dims(self) -> Vec<usize> {
        match self {
            ModelKind::Mlp => vec![784],
            ModelKind::Cnn => vec![1, 28, 28],
        }
    }
}

/// The MLP's type: `784 → 512 → 512 → 10` with ReLU.
pub type Mlp<B> = Sequential<(Linear<B>, ReLU, Linear<B>, ReLU, Linear<B>)>;

/// The CNN's type: conv 3x3 (32) → ReLU → max-pool 2 → conv 3x3 (64) → ReLU → max-pool 2 →
/// flatten → linear 3136 → 128 → ReLU → linear 128 → 10.
pub type Cnn<B> = Sequential<(
    Conv2d<B>,
    ReLU,
    MaxPool2d,
    Conv2d<B>,
    ReLU,
    MaxPool2d,
    Flatten,
    Linear<B>,
    ReLU,
    Linear<B>,
)>;

/// A multi-layer perceptron `784 → 512 → 512 → 10` with ReLU, initialised from `seed`.
pub fn mlp<B: Backend>(dtype: DType, seed: u64, backend: &B) -> Result<Mlp<B>> {
    mlp_with_precision(dtype, Precision::F32, seed, backend)
}

/// [`mlp`] with its linear layers computing under `precision`.
pub fn mlp_with_precision<B: Backend>(
    dtype: DType,
    precision: Precision,
    seed: u64,
    backend: &B,
) -> Result<Mlp<B>> {
    mlp_drawing(dtype, precision, seed, backend, &|_| true)
}

/// [`mlp_with_precision`] with the values of the layers `draws` accepts (by unit index, see
/// [`ReferenceModel::unit_prefixes`]) and placeholders for the others' (see
/// [`LayerDraws`]).
fn mlp_drawing<B: Backend>(
    dtype: DType,
    precision: Precision,
    seed: u64,
    backend: &B,
    draws: &dyn Fn(usize) -> bool,
) -> Result<Mlp<B>> {
    let mut g = LayerDraws::new(seed, draws);
    let linear = |i, o, g: &mut Generator| {
        LinearConfig::new(i, o)
            .dtype(dtype)
            .precision(precision)
            .init(backend, g)
    };
    Ok(Sequential::new((
        g.layer(|g| linear(784, 512, g))?,
        ReLU::new(),
        g.layer(|g| linear(512, 512, g))?,
        ReLU::new(),
        g.layer(|g| linear(512, 10, g))?,
    )))
}

/// The random stream of a reference model's build, layer by layer: layer `k` (with
/// parameters, counted from 0) draws its values when `draws(k)`, placeholders otherwise
/// ([`Generator::deferred`]); either way the stream moves on as a real draw would, so every
/// layer's values are those of the plain build from the same seed.
struct LayerDraws<'a> {
    stream: Generator,
    next: usize,
    draws: &'a dyn Fn(usize) -> bool,
}

impl<'a> LayerDraws<'a> {
    fn new(seed: u64, draws: &'a dyn Fn(usize) -> bool) -> Self {
        LayerDraws {
            stream: Generator::deferred(seed),
            next: 0,
            draws,
        }
    }

    /// Builds the next layer with parameters from the stream.
    fn layer<L>(&mut self, build: impl FnOnce(&mut Generator) -> Result<L>) -> Result<L> {
        let mut g = match (self.draws)(self.next) {
            true => self.stream.drawing(),
            false => self.stream.deferring(),
        };
        let layer = build(&mut g)?;
        (self.stream, self.next) = (g.deferring(), self.next + 1);
        Ok(layer)
    }
}

/// A small CNN for `[n, 1, 28, 28]` inputs (see [`Cnn`]), initialised from `seed`.
pub fn cnn<B: Backend>(dtype: DType, seed: u64, backend: &B) -> Result<Cnn<B>> {
    cnn_with_precision(dtype, Precision::F32, seed, backend)
}

/// [`cnn`] with its convolutions and linear layers computing under `precision` (parameters,
/// ReLU and pooling in `dtype`).
pub fn cnn_with_precision<B: Backend>(
    dtype: DType,
    precision: Precision,
    seed: u64,
    backend: &B,
) -> Result<Cnn<B>> {
    cnn_drawing(dtype, precision, seed, backend, &|_| true)
}

/// [`cnn_with_precision`] with the values of the layers `draws` accepts (by unit index) and
/// placeholders for the others' (see [`LayerDraws`]).
fn cnn_drawing<B: Backend>(
    dtype: DType,
    precision: Precision,
    seed: u64,
    backend: &B,
    draws: &dyn Fn(usize) -> bool,
) -> Result<Cnn<B>> {
    let mut g = LayerDraws::new(seed, draws);
    let conv = |c_in, c_out, g: &mut Generator| {
        Conv2dConfig::new(c_in, c_out, (3, 3))
            .padding((1, 1))
            .dtype(dtype)
            .precision(precision)
            .init(backend, g)
    };
    let linear = |i, o, g: &mut Generator| {
        LinearConfig::new(i, o)
            .dtype(dtype)
            .precision(precision)
            .init(backend, g)
    };
    let pool = || Pool2dConfig::new((2, 2)).init_max();
    Ok(Sequential::new((
        g.layer(|g| conv(1, 32, g))?,
        ReLU::new(),
        pool()?,
        g.layer(|g| conv(32, 64, g))?,
        ReLU::new(),
        pool()?,
        Flatten::new(),
        g.layer(|g| linear(64 * 7 * 7, 128, g))?,
        ReLU::new(),
        g.layer(|g| linear(128, 10, g))?,
    )))
}

/// Either reference model, for code that picks one at run time (the benchmarks, the `train`
/// command). Names, training mode and transfer are those of the model inside.
pub enum ReferenceModel<B: Backend> {
    /// The [`Mlp`].
    Mlp(Mlp<B>),
    /// The [`Cnn`] (boxed: it is much larger than the MLP's handles).
    Cnn(Box<Cnn<B>>),
    /// Either model with each layer that has parameters run as a unit of sharding level 3
    /// ([`ReferenceModel::shard_layers`]).
    Sharded(Box<ReferenceModel<B>>, Arc<ShardedUnits<B>>),
}

impl<B: Backend> ReferenceModel<B> {
    /// The parameter-name prefix of each layer that has parameters (`"0"`, `"2"`, `"4"` for
    /// the MLP; the convolutions and linear layers of the CNN): the units of
    /// [`ReferenceModel::shard_layers`].
    pub fn unit_prefixes(&self) -> Vec<String> {
        let indices: &[usize] = match self {
            ReferenceModel::Mlp(_) => &[0, 2, 4],
            ReferenceModel::Cnn(_) => &[0, 3, 7, 9],
            ReferenceModel::Sharded(inner, _) => return inner.unit_prefixes(),
        };
        indices.iter().map(|i| i.to_string()).collect()
    }

    /// The policy its layers compute under (that of its first layer: the builders give every
    /// layer the same).
    pub fn precision(&self) -> Precision {
        match self {
            ReferenceModel::Mlp(m) => m.layers().0.precision(),
            ReferenceModel::Cnn(m) => m.layers().0.precision(),
            ReferenceModel::Sharded(m, _) => m.precision(),
        }
    }

    /// The model with each layer that has parameters run through `units` (sharding level 3:
    /// each layer's parameters gathered for its forward and backward passes only; see
    /// [`ShardedUnits`]), whose units must be [`ReferenceModel::unit_prefixes`]. Parameter
    /// names do not change.
    pub fn shard_layers(self, units: Arc<ShardedUnits<B>>) -> Result<ReferenceModel<B>> {
        let prefixes = self.unit_prefixes();
        if units.len() != prefixes.len() || matches!(self, ReferenceModel::Sharded(..)) {
            return Err(Error::InvalidArgument {
                op: "ReferenceModel::shard_layers",
                msg: format!(
                    "{} units for the {} layers with parameters of a model not yet sharded",
                    units.len(),
                    prefixes.len()
                ),
            });
        }
        Ok(ReferenceModel::Sharded(Box::new(self), units))
    }

    /// An error naming a parameter that would run as a placeholder: a layer of a deferred
    /// build ([`ModelKind::build_deferred`]) not given its values yet. Released sharded layers
    /// pass (their pass gathers them).
    fn check_runnable(&self) -> Result<()> {
        let (model, units) = match self {
            ReferenceModel::Sharded(inner, units) => (&**inner, Some(&**units)),
            plain => (plain, None),
        };
        let how = "give each layer its values with ModelKind::init_unit (or \
                   ShardedUnits::initialize)";
        // Any model may hold placeholders: checked as a deferred build always.
        let layers = std::iter::once((String::new(), model));
        check_blocks_runnable("ReferenceModel", true, units, layers, how)
    }

    /// [`Forward::forward`] with the layers that have parameters run through `units`.
    fn forward_units(&self, x: &Var<B>, units: &Arc<ShardedUnits<B>>) -> Result<Var<B>> {
        match self {
            ReferenceModel::Mlp(m) => {
                let (l0, r1, l2, r3, l4) = m.layers();
                let x = r1.forward(&units.run(0, x, l0)?)?;
                let x = r3.forward(&units.run(1, &x, l2)?)?;
                units.run(2, &x, l4)
            }
            ReferenceModel::Cnn(m) => {
                let (c0, r1, p2, c3, r4, p5, f6, l7, r8, l9) = m.layers();
                let x = p2.forward(&r1.forward(&units.run(0, x, c0)?)?)?;
                let x = p5.forward(&r4.forward(&units.run(1, &x, c3)?)?)?;
                let x = r8.forward(&units.run(2, &f6.forward(&x)?, l7)?)?;
                units.run(3, &x, l9)
            }
            ReferenceModel::Sharded(inner, _) => inner.forward_units(x, units),
        }
    }
}

impl<B: Backend> Module<B> for ReferenceModel<B> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        match self {
            ReferenceModel::Mlp(m) => m.visit(prefix, visitor),
            ReferenceModel::Cnn(m) => m.visit(prefix, visitor),
            ReferenceModel::Sharded(m, _) => m.visit(prefix, visitor),
        }
    }
    fn set_training(&self, training: bool) {
        match self {
            ReferenceModel::Mlp(m) => m.set_training(training),
            ReferenceModel::Cnn(m) => m.set_training(training),
            ReferenceModel::Sharded(m, _) => m.set_training(training),
        }
    }
    fn training_mode(&self) -> Option<bool> {
        match self {
            ReferenceModel::Mlp(m) => m.training_mode(),
            ReferenceModel::Cnn(m) => m.training_mode(),
            ReferenceModel::Sharded(m, _) => m.training_mode(),
        }
    }
}

impl<B: Backend> ToBackend<B> for ReferenceModel<B> {
    type On<B2: Backend> = ReferenceModel<B2>;
    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<ReferenceModel<B2>> {
        Ok(match self {
            ReferenceModel::Mlp(m) => ReferenceModel::Mlp(m.to_backend(backend)?),
            ReferenceModel::Cnn(m) => ReferenceModel::Cnn(m.to_backend(backend)?),
            // Its parameters may be one rank's shares: gather them into a whole model first.
            ReferenceModel::Sharded(..) => {
                return Err(Error::InvalidArgument {
                    op: "ReferenceModel::to_backend",
                    msg: "a model whose layers are sharded units cannot move to another \
                          backend (move the model before sharding it)"
                        .into(),
                })
            }
        })
    }
}

/// Under a 16-bit policy the activations stay in the compute dtype from the first layer to the
/// last, as PyTorch's autocast keeps them: the input is cast once, ReLU, pooling and flatten
/// run on 16-bit values, and only the logits are cast back to the input's dtype. The values
/// are those of casting back after every layer (ReLU, max pooling and flatten commute with
/// rounding), without a cast of each activation and of its gradient.
impl<B: Backend> Forward<B> for ReferenceModel<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        self.check_runnable()?;
        let precision = self.precision();
        let inside = precision.to_compute(x)?;
        let y = match self {
            ReferenceModel::Mlp(m) => m.forward(&inside),
            ReferenceModel::Cnn(m) => m.forward(&inside),
            ReferenceModel::Sharded(m, units) => m.forward_units(&inside, units),
        }?;
        precision.from_compute(y, x.dtype())
    }
}
