//! [`DeferredUnits`]: a user's own model built without its units' values (PyTorch's meta-device
//! construction with FSDP's `param_init_fn`), each unit given them later, one at a time.

use super::units::ShardedUnits;
use crate::module::Module;
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, Error, Generator, Result};

/// What a recorded unit's build returns: its parameters, named inside the unit.
type Rebuild<'a, B> = Box<dyn Fn(&mut Generator) -> Result<Vec<(String, Var<B>)>> + 'a>;

/// One unit of the model, as [`DeferredUnits::unit`] recorded it.
struct Recorded<'a, B: Backend> {
    /// The unit's parameter-name prefix in the model (e.g. `blocks.3`).
    prefix: String,
    /// The stream where the unit's build started, drawing values.
    start: Generator,
    /// The unit's build, kept when its values were deferred.
    rebuild: Option<Rebuild<'a, B>>,
}

/// The units (sub-modules, e.g. transformer blocks) of a model built by the model's own
/// constructor, with or without their values: what lets a user's model be built for sharding
/// level 3 without any rank holding it whole, as [`crate::gpt::GptConfig::init_deferred`] does
/// for the GPT.
///
/// The constructor builds each unit through [`DeferredUnits::unit`], which records the unit's
/// prefix and where its draws start in the random stream. Made [`DeferredUnits::deferred`],
/// each unit is built from a generator that draws placeholders (one element broadcast to each
/// parameter's shape, see [`Generator::deferred`]) while moving the stream as real draws would,
/// so that everything drawn after it has the plain build's values. Later,
/// [`DeferredUnits::initialize`] gives the units their values one at a time through
/// [`ShardedUnits::initialize`] (rank 0's values broadcast, each rank keeping its shares): each
/// unit's build runs again from its recorded point, drawing values, and its parameters are
/// copied into the model's. The model then holds the plain build's values bit for bit. Made
/// [`DeferredUnits::immediate`], the same constructor builds the plain model.
///
/// Until a unit has its values, [`ShardedUnits::run`] refuses to run it (a typed error naming
/// the parameter), so a model whose units run through [`UnitSlot::run`](super::UnitSlot::run)
/// never computes with placeholders.
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_core::Generator;
/// use tessera_cpu::Cpu;
/// use tessera_nn::distributed::DeferredUnits;
/// use tessera_nn::layers::{Linear, LinearConfig};
/// use tessera_nn::Module;
///
/// /// Two layers, each its own unit.
/// #[derive(tessera_nn::Module)]
/// struct Pair<B: tessera_core::Backend> {
///     first: Linear<B>,
///     second: Linear<B>,
/// }
///
/// fn build<'a>(dev: &'a Cpu, g: &mut Generator, units: &mut DeferredUnits<'a, Cpu>) -> tessera_core::Result<Pair<Cpu>> {
///     Ok(Pair {
///         first: units.unit("first", g, move |g| LinearConfig::new(4, 4).init(dev, g))?,
///         second: units.unit("second", g, move |g| LinearConfig::new(4, 2).init(dev, g))?,
///     })
/// }
///
/// let dev = Cpu::new();
/// let plain = build(&dev, &mut Generator::new(3), &mut DeferredUnits::immediate())?;
/// let mut units = DeferredUnits::deferred();
/// let model = build(&dev, &mut Generator::new(3), &mut units)?;
/// assert_eq!(units.prefixes(), ["first", "second"]);
/// units.init_all(&model)?; // one process; sharded: units.initialize(&sharded_units, &model)
/// for ((_, a), (_, b)) in plain.parameters().iter().zip(model.parameters()) {
///     assert_eq!(a.value().to_vec::<f32>()?, b.value().to_vec::<f32>()?);
/// }
/// # Ok(()) }
/// ```
pub struct DeferredUnits<'a, B: Backend> {
    defer: bool,
    units: Vec<Recorded<'a, B>>,
}

impl<'a, B: Backend> DeferredUnits<'a, B> {
    /// Units built as placeholders, given their values later ([`DeferredUnits::initialize`]).
    pub fn deferred() -> Self {
        DeferredUnits {
            defer: true,
            units: Vec::new(),
        }
    }

    /// Units built with their values (the plain build), their prefixes still recorded.
    pub fn immediate() -> Self {
        DeferredUnits {
            defer: false,
            units: Vec::new(),
        }
    }

    /// Whether units are built as placeholders.
    pub fn is_deferred(&self) -> bool {
        self.defer
    }

    /// Builds one unit of the model, `build(generator)`, whose parameters the model names
    /// `{prefix}.{name}`. Deferred, `build` draws placeholders from `generator` (which moves on
    /// as real draws would) and is kept to draw the unit's values later, from the same point:
    /// it must build the same unit each time (it runs once more per initialisation).
    pub fn unit<M: Module<B>>(
        &mut self,
        prefix: impl Into<String>,
        generator: &mut Generator,
        build: impl Fn(&mut Generator) -> Result<M> + 'a,
    ) -> Result<M> {
        let prefix = prefix.into();
        if prefix.is_empty() || self.units.iter().any(|u| u.prefix == prefix) {
            return Err(Error::InvalidArgument {
                op: "DeferredUnits::unit",
                msg: format!(
                    "unit prefixes must be non-empty and distinct, got `{prefix}` after {:?}",
                    self.prefixes()
                ),
            });
        }
        let start = generator.drawing();
        let (module, rebuild) = if self.defer {
            let module = generator.defer(&build)?;
            let rebuild: Rebuild<'a, B> = Box::new(move |g| Ok(build(g)?.parameters()));
            (module, Some(rebuild))
        } else {
            (build(generator)?, None)
        };
        self.units.push(Recorded {
            prefix,
            start,
            rebuild,
        });
        Ok(module)
    }

    /// The units' prefixes in the order they were built: what [`ShardedUnits::new`] takes.
    pub fn prefixes(&self) -> Vec<String> {
        self.units.iter().map(|u| u.prefix.clone()).collect()
    }

    /// The number of units.
    pub fn len(&self) -> usize {
        self.units.len()
    }

    /// Whether no unit was built.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// Gives unit `unit`'s parameters in `model` (which its constructor built through these
    /// units) the values a plain build draws, whole: its build runs again from its recorded
    /// point of the stream. Nothing to do for a unit built with its values. The rebuilt unit's
    /// parameters must be the model's `{prefix}.*` parameters, by name, shape and dtype.
    pub fn init_unit(&self, model: &(impl Module<B> + ?Sized), unit: usize) -> Result<()> {
        const OP: &str = "DeferredUnits::init_unit";
        let recorded = self.units.get(unit).ok_or_else(|| Error::InvalidArgument {
            op: OP,
            msg: format!("no unit {unit}: {} were built", self.units.len()),
        })?;
        let Some(rebuild) = &recorded.rebuild else {
            return Ok(());
        };
        let fresh = no_grad(|| rebuild(&mut recorded.start.clone()))?;
        let inside = format!("{}.", recorded.prefix);
        let targets: Vec<(String, Var<B>)> = (model.parameters().into_iter())
            .filter_map(|(name, var)| Some((name.strip_prefix(&inside)?.to_string(), var)))
            .collect();
        let mismatch = |msg: String| Error::InvalidArgument {
            op: OP,
            msg: format!("unit `{}`: {msg}", recorded.prefix),
        };
        if let Some((name, _)) = targets
            .iter()
            .find(|(n, _)| !fresh.iter().any(|f| f.0 == *n))
        {
            return Err(mismatch(format!(
                "the model's parameter {inside}{name} is not one its build makes"
            )));
        }
        let mut pairs = Vec::with_capacity(fresh.len());
        for (name, value) in &fresh {
            let Some((_, target)) = targets.iter().find(|(n, _)| n == name) else {
                return Err(mismatch(format!(
                    "its build makes {name}, which the model has not as {inside}{name}"
                )));
            };
            if target.dims() != value.dims() || target.dtype() != value.dtype() {
                return Err(mismatch(format!(
                    "{inside}{name} is a {} {:?} in the model, a {} {:?} in its build",
                    target.dtype(),
                    target.dims(),
                    value.dtype(),
                    value.dims()
                )));
            }
            pairs.push((target, value));
        }
        for (target, value) in pairs {
            target.set_value(value.value())?;
        }
        Ok(())
    }

    /// [`DeferredUnits::init_unit`] for every unit: the whole model's values in one process.
    pub fn init_all(&self, model: &(impl Module<B> + ?Sized)) -> Result<()> {
        (0..self.units.len()).try_for_each(|unit| self.init_unit(model, unit))
    }

    /// Gives every unit its values through `units` (made from [`DeferredUnits::prefixes`]), one
    /// unit at a time, each rank keeping its shares ([`ShardedUnits::initialize`]): what takes
    /// the place of [`ShardedUnits::release_all`] for a deferred build. A collective.
    pub fn initialize(
        &self,
        units: &ShardedUnits<B>,
        model: &(impl Module<B> + ?Sized),
    ) -> Result<()> {
        if units.prefixes() != self.prefixes() {
            return Err(Error::InvalidArgument {
                op: "DeferredUnits::initialize",
                msg: format!(
                    "the sharded units are {:?}, the model's deferred units {:?}",
                    units.prefixes(),
                    self.prefixes()
                ),
            });
        }
        units.initialize(&mut |unit| self.init_unit(model, unit))
    }
}
