//! The text jobs' two AdamW groups (weight decay on matrices, none on vectors), kept whole on
//! every rank or sharded over the ranks ([`ShardedOptimizer`], `train --shard 1|2`).

use crate::gpt_job::GptTrainConfig;
use crate::memory::tensor_bytes;
use crate::text_training::LanguageModel;
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{Backend, Result};
use tessera_nn::clip::{clip_grad_norm, clip_grad_norm_across, grad_norm, grad_norm_across};
use tessera_nn::distributed::{
    Communicator, DistributedDataParallel, ShardLevel, ShardedOptimizer, ShardedUnits,
};
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::precision::{DynamicLossScaler, ScalerStep};
use tessera_nn::Module;

/// The two optimizer groups of the text jobs (the GPT and fine-tuning), as the run checkpoint names them: nanoGPT's, decay
/// on every parameter of rank >= 2 (matrices and embeddings), none on biases and LayerNorm
/// scales.
// One value per job: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum GptOptimizers<B: Backend> {
    /// Every rank keeps all of the state; gradients are all-reduced by the
    /// [`DistributedDataParallel`] wrapper.
    Whole { decay: AdamW<B>, no_decay: AdamW<B> },
    /// Each rank keeps its share of the state (and at level 2 of the gradients; at level 3 the
    /// blocks' parameters too, between uses: `units`).
    Sharded {
        decay: ShardedOptimizer<B, AdamW<B>>,
        no_decay: ShardedOptimizer<B, AdamW<B>>,
        units: Option<Arc<ShardedUnits<B>>>,
    },
}

impl<B: Backend> GptOptimizers<B> {
    /// AdamW with the job's betas and decay over `model`'s matrices, without decay over the
    /// rest, at `config.shard` over `comm`. At level 3 the model's blocks then run as sharded
    /// units, whole until [`GptOptimizers::release`].
    pub fn new<M: LanguageModel<B>>(
        model: &M,
        config: &GptTrainConfig,
        comm: &Arc<dyn Communicator<B>>,
    ) -> Result<Self> {
        let (decay, no_decay): (Vec<_>, Vec<_>) = model
            .parameters()
            .into_iter()
            .partition(|(_, v): &(String, Var<B>)| v.rank() >= 2);
        let base = AdamWConfig {
            lr: config.lr,
            betas: (0.9, 0.99),
            eps: 1e-8,
            weight_decay: config.args.weight_decay,
            amsgrad: false,
        };
        let plain = AdamWConfig {
            weight_decay: 0.0,
            ..base
        };
        Ok(match config.shard {
            ShardLevel::Replicated => GptOptimizers::Whole {
                decay: AdamW::new(decay, base)?,
                no_decay: AdamW::new(no_decay, plain)?,
            },
            ShardLevel::Parameters => {
                let units = ShardedUnits::new(comm.clone(), model.block_prefixes())?;
                units.set_prefetch(config.shard_prefetch);
                let shard = |params, c: AdamWConfig| {
                    let mut o = ShardedOptimizer::with_units(
                        params,
                        &units,
                        config.bucket_bytes,
                        |shares| AdamW::new(shares, c),
                    )?;
                    o.set_overlap_reductions(config.overlap_reductions);
                    Ok::<_, tessera_core::Error>(o)
                };
                let (decay, no_decay) = (shard(decay, base)?, shard(no_decay, plain)?);
                model.shard_blocks(units.clone())?;
                GptOptimizers::Sharded {
                    decay,
                    no_decay,
                    units: Some(units),
                }
            }
            level => {
                let shard = |params, c: AdamWConfig| {
                    let mut o = ShardedOptimizer::new(
                        params,
                        comm.clone(),
                        level,
                        config.bucket_bytes,
                        |shares| AdamW::new(shares, c),
                    )?;
                    o.set_overlap_reductions(config.overlap_reductions);
                    Ok::<_, tessera_core::Error>(o)
                };
                GptOptimizers::Sharded {
                    decay: shard(decay, base)?,
                    no_decay: shard(no_decay, plain)?,
                    units: None,
                }
            }
        })
    }

    /// The groups by name, for run checkpoints.
    pub fn groups(&self) -> [(&'static str, &dyn Optimizer<B>); 2] {
        match self {
            GptOptimizers::Whole { decay, no_decay } => [("decay", decay), ("no_decay", no_decay)],
            GptOptimizers::Sharded {
                decay, no_decay, ..
            } => [("decay", decay), ("no_decay", no_decay)],
        }
    }

    /// The groups by name, to restore them.
    pub fn groups_mut(&mut self) -> [(&'static str, &mut dyn Optimizer<B>); 2] {
        match self {
            GptOptimizers::Whole { decay, no_decay } => [("decay", decay), ("no_decay", no_decay)],
            GptOptimizers::Sharded {
                decay, no_decay, ..
            } => [("decay", decay), ("no_decay", no_decay)],
        }
    }

    /// Sets both groups' learning rate.
    pub fn set_learning_rate(&mut self, lr: f64) {
        for (_, o) in self.groups_mut() {
            o.set_learning_rate(lr);
        }
    }

    /// Clears every gradient.
    pub fn zero_grad(&mut self) {
        for (_, o) in self.groups_mut() {
            o.zero_grad();
        }
    }

    /// After backward: the gradients' mean over the ranks (a collective).
    pub fn sync_gradients<M: Module<B>>(
        &mut self,
        ddp: &DistributedDataParallel<B, M>,
    ) -> Result<()> {
        match self {
            GptOptimizers::Whole { .. } => {
                if ddp.reducer().communicator().world_size() > 1 {
                    ddp.sync_gradients()?;
                }
                Ok(())
            }
            GptOptimizers::Sharded {
                decay, no_decay, ..
            } => {
                decay.sync_gradients()?;
                no_decay.sync_gradients()
            }
        }
    }

    /// The leaves whose gradients are this rank's reduced gradients: the parameters, or the
    /// shares of a sharded state.
    fn gradient_leaves(&self, params: &[Var<B>]) -> Vec<Var<B>> {
        match self {
            GptOptimizers::Whole { .. } => params.to_vec(),
            GptOptimizers::Sharded {
                decay, no_decay, ..
            } => decay
                .shards()
                .iter()
                .chain(no_decay.shards())
                .cloned()
                .collect(),
        }
    }

    /// Unscales the reduced gradients and updates the f16 loss scale (the ranks agree).
    pub fn unscale(
        &self,
        scaler: &mut DynamicLossScaler,
        params: &[Var<B>],
        comm: &dyn Communicator<B>,
    ) -> Result<ScalerStep> {
        let leaves = self.gradient_leaves(params);
        match self {
            // Every rank holds the same averaged gradients.
            GptOptimizers::Whole { .. } => scaler.unscale_and_update(&leaves),
            GptOptimizers::Sharded { .. } => scaler.unscale_and_update_across(&leaves, comm),
        }
    }

    /// Clips the reduced gradients to a global norm of `max_norm`; returns the norm.
    pub fn clip(
        &self,
        max_norm: f64,
        params: &[Var<B>],
        comm: &dyn Communicator<B>,
    ) -> Result<f64> {
        let leaves = self.gradient_leaves(params);
        match self {
            GptOptimizers::Whole { .. } => clip_grad_norm(&leaves, max_norm),
            GptOptimizers::Sharded { .. } => clip_grad_norm_across(&leaves, max_norm, comm),
        }
    }

    /// The global norm of the reduced gradients (a collective when sharded).
    pub fn norm(&self, params: &[Var<B>], comm: &dyn Communicator<B>) -> Result<f64> {
        let leaves = self.gradient_leaves(params);
        match self {
            GptOptimizers::Whole { .. } => grad_norm(&leaves),
            GptOptimizers::Sharded { .. } => grad_norm_across(&leaves, comm),
        }
    }

    /// Updates the parameters.
    pub fn step(&mut self) -> Result<()> {
        for (_, o) in self.groups_mut() {
            o.step()?;
        }
        Ok(())
    }

    /// Gathers a sharded state (and level 3's parameters) on every rank before a checkpoint
    /// (a collective).
    pub fn prepare_checkpoint(&self) -> Result<()> {
        self.hold()?;
        for (_, o) in self.groups() {
            o.prepare_checkpoint()?;
        }
        Ok(())
    }

    /// Frees what [`GptOptimizers::prepare_checkpoint`] gathered.
    pub fn finish_checkpoint(&self) -> Result<()> {
        for (_, o) in self.groups() {
            o.finish_checkpoint();
        }
        self.release()
    }

    /// Level 3: holds every parameter whole (a collective), to save, restore or sample.
    pub fn hold(&self) -> Result<()> {
        self.units().map_or(Ok(()), ShardedUnits::gather_all)
    }

    /// Level 3's units (released during training), if any.
    pub fn units(&self) -> Option<&ShardedUnits<B>> {
        self.units_arc().map(Arc::as_ref)
    }

    /// Level 3's units, shared (for calls that also borrow the groups).
    pub fn shared_units(&self) -> Option<Arc<ShardedUnits<B>>> {
        self.units_arc().cloned()
    }

    fn units_arc(&self) -> Option<&Arc<ShardedUnits<B>>> {
        match self {
            GptOptimizers::Sharded { units, .. } => units.as_ref(),
            GptOptimizers::Whole { .. } => None,
        }
    }

    /// Level 3: back to shares (taken from what the parameters hold now after
    /// [`GptOptimizers::hold`]).
    pub fn release(&self) -> Result<()> {
        self.units().map_or(Ok(()), ShardedUnits::release_all)
    }

    /// Level 3: gives the blocks their first values one at a time (`init(block)`, e.g. a
    /// deferred build's [`LanguageModel::init_block`]), each rank keeping its shares (a
    /// collective, in place of [`GptOptimizers::release`] on a fresh run).
    pub fn initialize(&self, init: &mut dyn FnMut(usize) -> Result<()>) -> Result<()> {
        self.units().map_or(Ok(()), |units| units.initialize(init))
    }

    /// The most bytes of parameters, gradients and optimizer state this rank holds at once.
    pub fn state_bytes(&self, params: &[Var<B>]) -> usize {
        match self {
            GptOptimizers::Whole { decay, no_decay } => {
                let whole: usize = params
                    .iter()
                    .map(|v| v.numel() * v.dtype().size_in_bytes())
                    .sum();
                let state = |o: &AdamW<B>| tensor_bytes(o.state().iter().map(|(_, t)| t));
                2 * whole + state(decay) + state(no_decay)
            }
            GptOptimizers::Sharded {
                decay,
                no_decay,
                units,
            } => {
                decay.peak_state_bytes()
                    + no_decay.peak_state_bytes()
                    + units.as_ref().map_or(0, |u| u.peak_unit_bytes())
            }
        }
    }
}
