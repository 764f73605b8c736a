//! [`UnitSlot`]: where a user's model keeps the [`ShardedUnits`] its units run through once it
//! is sharded (level 3).

use super::units::{install_units, ShardedUnits};
use crate::module::{Forward, Module, ModuleVisitor, ToBackend};
use std::sync::{Arc, OnceLock};
use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result};

/// The [`ShardedUnits`] a model's units run through, none until [`UnitSlot::install`]: a field
/// of a user's model whose forward pass runs each unit through [`UnitSlot::run`], as
/// [`crate::gpt::Gpt::shard_blocks`] does for the GPT's blocks. Until then each unit runs as it
/// is. As a field of a derived module it holds no parameter; moving the model to another
/// backend ([`ToBackend`]) is refused once units are installed (their parameters are shares).
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_autograd::Var;
/// use tessera_core::{Backend, Generator, Result, Tensor};
/// use tessera_nn::distributed::UnitSlot;
/// use tessera_nn::layers::{Linear, LinearConfig};
/// use tessera_nn::Forward;
///
/// #[derive(tessera_nn::Module)]
/// struct Stack<B: Backend> {
///     layers: Vec<Linear<B>>,
///     units: UnitSlot<B>, // `units.install(sharded_units, layers.len())` once sharded
/// }
///
/// impl<B: Backend> Forward<B> for Stack<B> {
///     fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
///         let mut x = x.clone();
///         for (i, layer) in self.layers.iter().enumerate() {
///             x = self.units.run(i, &x, layer)?;
///         }
///         Ok(x)
///     }
/// }
///
/// let (dev, mut g) = (tessera_cpu::Cpu::new(), Generator::new(0));
/// let layers = (0..2).map(|_| LinearConfig::new(3, 3).init(&dev, &mut g)).collect::<Result<_>>()?;
/// let stack = Stack { layers, units: UnitSlot::new() };
/// let y = stack.forward(&Var::constant(Tensor::ones([1, 3], tessera_core::DType::F32, &dev)?))?;
/// assert_eq!(y.dims(), [1, 3]);
/// # Ok(()) }
/// ```
pub struct UnitSlot<B: Backend> {
    units: OnceLock<Arc<ShardedUnits<B>>>,
}

impl<B: Backend> UnitSlot<B> {
    /// An empty slot: units run as they are.
    pub fn new() -> Self {
        UnitSlot {
            units: OnceLock::new(),
        }
    }

    /// Runs the units through `units` from now on; `count` is how many units the model has
    /// (it must be `units.len()`). Once per slot.
    pub fn install(&self, units: Arc<ShardedUnits<B>>, count: usize) -> Result<()> {
        install_units(&self.units, units, count, "UnitSlot::install", "units")
    }

    /// The installed units, if any.
    pub fn units(&self) -> Option<&Arc<ShardedUnits<B>>> {
        self.units.get()
    }

    /// Unit `unit`'s forward pass on `x`: through the installed [`ShardedUnits::run`], or
    /// `module.forward(x)` when none is installed.
    pub fn run<M>(&self, unit: usize, x: &Var<B>, module: &M) -> Result<Var<B>>
    where
        M: Forward<B> + Module<B> + Clone + Send + Sync + 'static,
    {
        match self.units.get() {
            Some(units) => units.run(unit, x, module),
            None => module.forward(x),
        }
    }
}

impl<B: Backend> Default for UnitSlot<B> {
    fn default() -> Self {
        UnitSlot::new()
    }
}

impl<B: Backend> Clone for UnitSlot<B> {
    /// A slot holding the same units, if any.
    fn clone(&self) -> Self {
        UnitSlot {
            units: self.units.clone(),
        }
    }
}

impl<B: Backend> Module<B> for UnitSlot<B> {
    fn visit(&self, _: &str, _: &mut dyn ModuleVisitor<B>) {}
    fn set_training(&self, _: bool) {}
    fn training_mode(&self) -> Option<bool> {
        None
    }
}

impl<B: Backend> ToBackend<B> for UnitSlot<B> {
    type On<B2: Backend> = UnitSlot<B2>;
    fn to_backend<B2: Backend>(&self, _: &B2) -> Result<UnitSlot<B2>> {
        if self.units.get().is_some() {
            return Err(Error::InvalidArgument {
                op: "UnitSlot::to_backend",
                msg: "a model whose units are sharded cannot move to another backend (move the \
                      model before sharding it)"
                    .into(),
            });
        }
        Ok(UnitSlot::new())
    }
}
