//! [`ShardedOptimizer`]: data parallelism whose optimizer state (level 1), gradients (level 2)
//! and parameters between uses (level 3, with [`ShardedUnits`]) are split over the ranks,
//! ZeRO's stages. See [`ShardLevel`].

mod backward_reducer;
mod deferred;
mod flat;
mod level;
mod prefetch;
mod slot;
mod units;

pub use deferred::DeferredUnits;
pub use level::ShardLevel;
pub use slot::UnitSlot;
pub(crate) use units::{cached_step, install_units};
pub use units::{ShardedUnits, WholeVisitor};

use crate::clip::{clip_grad_norm_across, grad_norm_across};
use crate::distributed::buckets::plan_buckets;
use crate::distributed::communicator::{Communicator, Reduction};
use crate::optim::{ConsolidatedVisitor, LocalShards, Optimizer, StateSource, TensorPiece};
use backward_reducer::BackwardReducer;
use flat::FlatBucket;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, Error, Result, Tensor};
use units::UnitPart;

/// An optimizer of which each rank holds and updates one share: every bucket of parameters
/// (about `bucket_bytes` each, as [`crate::distributed::plan_buckets`] groups them) is laid
/// out flat, padded to a multiple of the world size `N`, and rank `r` owns elements
/// `[r·len/N, (r+1)·len/N)` of it. The wrapped optimizer (made by the `make` function of
/// [`ShardedOptimizer::new`]) runs over those shares, one rank-1 parameter per bucket, so its
/// state is 1/N of a plain optimizer's.
///
/// A step ([`Optimizer::step`], or [`ShardedOptimizer::sync_gradients`] first to clip or
/// unscale the reduced gradients):
/// 1. the gradients' mean over the ranks: all-reduced at [`ShardLevel::OptimizerState`]
///    (the parameters keep the whole mean, as with plain data parallelism), reduce-scattered at
///    [`ShardLevel::Gradients`] (only this rank's share is kept; the parameters' gradients are
///    dropped);
/// 2. the wrapped optimizer updates this rank's share of the parameters;
/// 3. the shares are all-gathered into every parameter.
///
/// Every rank must call the collectives in the same order (each step, each checkpoint). The
/// element-wise update rules (SGD, Adam, AdamW) then give the same parameters as plain data
/// parallelism bit for bit: the reductions are the communicator's all-reduce restricted to a
/// share, and the update of an element does not depend on its neighbours.
///
/// **Checkpoints** are consolidated: [`Optimizer::prepare_checkpoint`] (a collective, which the
/// [`crate::training::Learner`] calls on every rank) gathers the shares of the state, after
/// which [`Optimizer::state`] returns it under the wrapped optimizer's own names for each
/// parameter (`"<param>.exp_avg"`...), exactly what a plain optimizer saves. So a checkpoint
/// written at any level and world size resumes at any other, and
/// [`Optimizer::load_state`] takes such a state and keeps this rank's share. Or, without
/// gathering anything, each rank writes its own pieces ([`Optimizer::local_shards`],
/// [`crate::run::save_sharded_checkpoint`]).
pub struct ShardedOptimizer<B: Backend, O> {
    level: ShardLevel,
    comm: Arc<dyn Communicator<B>>,
    params: Vec<(String, Var<B>)>,
    buckets: Vec<FlatBucket>,
    /// One rank-1 leaf per bucket: this rank's share of the parameters, with its gradient.
    shards: Vec<Var<B>>,
    /// Level 3: the units, and which buckets are parts of one (their parameters are sharded
    /// between uses and their gradients reduced during backward).
    units: Option<Arc<ShardedUnits<B>>>,
    unit_bucket: Vec<bool>,
    /// Levels 2 and 3: reduces the (non-unit) buckets during backward, unless switched off.
    reducer: Option<Arc<BackwardReducer<B>>>,
    /// Whether the reductions during backward are started rather than awaited
    /// ([`ShardedOptimizer::set_overlap_reductions`]).
    overlap: bool,
    inner: O,
    /// Whether the shares' gradients hold this step's reduced gradients.
    synced: bool,
    /// The consolidated state, between `prepare_checkpoint` and `finish_checkpoint`.
    gathered: Mutex<Option<NamedTensors<B>>>,
}

/// An optimizer state: named tensors.
type NamedTensors<B> = Vec<(String, Tensor<B>)>;

/// The name of bucket `i`'s share in the wrapped optimizer.
fn shard_name(bucket: usize) -> String {
    format!("bucket{bucket}")
}

impl<B: Backend, O: Optimizer<B>> ShardedOptimizer<B, O> {
    /// Shards the optimizer of `params` (every rank passes the same parameters, with the same
    /// values: e.g. those of a [`crate::distributed::DistributedDataParallel`], which broadcast
    /// rank 0's) over `comm` at `level` (1 or 2; level 0 is
    /// [`crate::distributed::DistributedOptimizer`], level 3 is [`ShardedOptimizer::with_units`]), in
    /// buckets of about `bucket_bytes`. `make` builds the wrapped optimizer over the shares
    /// (named `"bucket0"`, `"bucket1"`...), e.g. `|shares| AdamW::new(shares, config)`.
    pub fn new(
        params: Vec<(String, Var<B>)>,
        comm: Arc<dyn Communicator<B>>,
        level: ShardLevel,
        bucket_bytes: usize,
        make: impl FnOnce(Vec<(String, Var<B>)>) -> Result<O>,
    ) -> Result<Self> {
        const OP: &str = "ShardedOptimizer::new";
        match level {
            ShardLevel::OptimizerState | ShardLevel::Gradients => {}
            ShardLevel::Replicated => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    msg: "level 0 shards nothing: use DistributedDataParallel::wrap_optimizer"
                        .into(),
                })
            }
            ShardLevel::Parameters => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    msg: "level 3 shards the parameters of units: use \
                          ShardedOptimizer::with_units"
                        .into(),
                })
            }
        }
        if bucket_bytes == 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: "bucket_bytes must be at least 1".into(),
            });
        }
        let (rank, world) = (comm.rank(), comm.world_size());
        let sizes: Vec<_> = params.iter().map(|(_, v)| (v.dtype(), v.numel())).collect();
        let buckets: Vec<FlatBucket> = plan_buckets(&sizes, bucket_bytes)
            .iter()
            .map(|b| FlatBucket::new(b, rank, world))
            .collect();
        let mut shards = Vec::with_capacity(buckets.len());
        for bucket in &buckets {
            if !bucket.dtype.is_float() {
                return Err(Error::UnsupportedDType {
                    op: OP,
                    dtype: bucket.dtype,
                });
            }
            shards.push(Var::param(bucket.share(&params, |v| Ok(v.value()))?));
        }
        let named = shards
            .iter()
            .enumerate()
            .map(|(i, v)| (shard_name(i), v.clone()))
            .collect();
        let inner = make(named)?;
        let mut optimizer = ShardedOptimizer {
            level,
            comm,
            params,
            buckets,
            unit_bucket: vec![false; shards.len()],
            shards,
            units: None,
            reducer: None,
            overlap: false,
            inner,
            synced: false,
            gathered: Mutex::new(None),
        };
        if level == ShardLevel::Gradients {
            optimizer.set_reduce_during_backward(true)?;
        }
        Ok(optimizer)
    }

    /// Level 3 over `units`: the parameters of `params` that belong to a unit (by name,
    /// [`ShardedUnits::unit_of`]) are sharded between uses (one flat share per unit and dtype,
    /// registered with `units`, whose [`ShardedUnits::run`] the model's forward pass must go
    /// through); the others are treated as at level 2. Give each optimizer group its own
    /// `ShardedOptimizer` over the same `units`, then call [`ShardedUnits::release_all`] once
    /// every group is made (and any checkpoint restored).
    pub fn with_units(
        params: Vec<(String, Var<B>)>,
        units: &Arc<ShardedUnits<B>>,
        bucket_bytes: usize,
        make: impl FnOnce(Vec<(String, Var<B>)>) -> Result<O>,
    ) -> Result<Self> {
        const OP: &str = "ShardedOptimizer::with_units";
        let comm = units.communicator().clone();
        let (rank, world) = (comm.rank(), comm.world_size());
        let mut per_unit: Vec<Vec<(String, Var<B>)>> = vec![Vec::new(); units.len()];
        let mut root = Vec::new();
        for (name, var) in params {
            match units.unit_of(&name) {
                Some(u) => per_unit[u].push((name, var)),
                None => root.push((name, var)),
            }
        }
        // The root's parameters first, in level-2 buckets of `bucket_bytes`...
        let sizes = |ps: &[(String, Var<B>)]| -> Vec<_> {
            ps.iter().map(|(_, v)| (v.dtype(), v.numel())).collect()
        };
        let mut buckets: Vec<FlatBucket> = plan_buckets(&sizes(&root), bucket_bytes.max(1))
            .iter()
            .map(|b| FlatBucket::new(b, rank, world))
            .collect();
        let mut unit_bucket = vec![false; buckets.len()];
        let mut all = root;
        let mut parts = Vec::new();
        // ...then each unit's, one flat bucket per dtype.
        for (u, unit_params) in per_unit.into_iter().enumerate() {
            if unit_params.is_empty() {
                continue;
            }
            let offset = all.len();
            for bucket in plan_buckets(&sizes(&unit_params), usize::MAX) {
                let local = FlatBucket::new(&bucket, rank, world);
                let mut global = local.clone();
                global.params.iter_mut().for_each(|i| *i += offset);
                let part_params: Vec<_> = local
                    .params
                    .iter()
                    .map(|&i| unit_params[i].clone())
                    .collect();
                let mut relayout = local.clone();
                relayout.params = (0..part_params.len()).collect();
                parts.push((u, part_params, relayout, buckets.len()));
                buckets.push(global);
                unit_bucket.push(true);
            }
            all.extend(unit_params);
        }
        let mut shards = Vec::with_capacity(buckets.len());
        for bucket in &buckets {
            if !bucket.dtype.is_float() {
                return Err(Error::UnsupportedDType {
                    op: OP,
                    dtype: bucket.dtype,
                });
            }
            shards.push(Var::param(bucket.share(&all, |v| Ok(v.value()))?));
        }
        for (u, part_params, layout, index) in parts {
            let part = UnitPart {
                params: part_params,
                layout,
                shard: shards[index].clone(),
            };
            units.register(u, Arc::new(part));
        }
        let named = shards
            .iter()
            .enumerate()
            .map(|(i, v)| (shard_name(i), v.clone()))
            .collect();
        let inner = make(named)?;
        let mut optimizer = ShardedOptimizer {
            level: ShardLevel::Parameters,
            comm,
            params: all,
            buckets,
            shards,
            units: Some(units.clone()),
            unit_bucket,
            reducer: None,
            overlap: false,
            inner,
            synced: false,
            gathered: Mutex::new(None),
        };
        optimizer.set_reduce_during_backward(true)?;
        Ok(optimizer)
    }

    /// The level.
    pub fn level(&self) -> ShardLevel {
        self.level
    }

    /// The wrapped optimizer (over this rank's shares).
    pub fn inner(&self) -> &O {
        &self.inner
    }

    /// This rank's shares of the parameters, one rank-1 leaf per bucket; after
    /// [`ShardedOptimizer::sync_gradients`] their gradients are the reduced gradients (what a
    /// loss scaler unscales, e.g. `DynamicLossScaler::unscale_and_update_across`).
    pub fn shards(&self) -> &[Var<B>] {
        &self.shards
    }

    /// Replaces each share's gradient by this rank's share of the gradients' mean over the
    /// ranks (a collective); a parameter without a gradient takes part with zeros. Called by
    /// [`Optimizer::step`] unless called since the last step.
    pub fn sync_gradients(&mut self) -> Result<()> {
        let world = self.comm.world_size();
        let reduced_in_backward = match &self.reducer {
            Some(reducer) => reducer.finish()?,
            None => Vec::new(),
        };
        for (i, (bucket, shard)) in self.buckets.iter().zip(&self.shards).enumerate() {
            if reduced_in_backward.contains(&i) {
                continue;
            }
            if self.unit_bucket[i] {
                // Reduced during backward ([`ShardedUnits::run`]); an unused unit has none.
                if shard.grad().is_none() {
                    shard.set_grad(Some(shard.value().zeros_like()?));
                }
                continue;
            }
            let flat = bucket.flatten_grads(&self.params, world)?;
            let mine = match self.level {
                ShardLevel::Gradients | ShardLevel::Parameters => {
                    let mine = self.comm.reduce_scatter(&flat, Reduction::Mean)?;
                    for &index in &bucket.params {
                        self.params[index].1.set_grad(None);
                    }
                    mine
                }
                _ => {
                    let mut mean = flat;
                    self.comm.all_reduce(&mut mean, Reduction::Mean)?;
                    for (index, piece) in bucket.pieces(&self.params, &mean)? {
                        self.params[index].1.set_grad(Some(piece.contiguous()?));
                    }
                    bucket.shard_of(&mean)?
                }
            };
            shard.set_grad(Some(mine));
        }
        self.synced = true;
        Ok(())
    }

    /// Whether levels 2 and 3 reduce-scatter gradients during the backward pass (the default):
    /// each bucket (about `bucket_bytes`) as soon as the pass has completed the gradients of all
    /// its parameters, in bucket order (every rank the same), dropping the whole gradients, so a
    /// rank never holds all of them at once (at level 3 this concerns the parameters outside
    /// the units; the units' are reduced as each unit's backward ends). Switched off, the
    /// gradients stay whole until [`ShardedOptimizer::sync_gradients`].
    ///
    /// Every rank must switch alike, and every pass must reach the same parameters on every
    /// rank (as PyTorch's DDP requires). Several backward passes before a step (gradient
    /// accumulation) each reduce their own gradients, and the shares add them up: equal to
    /// reducing the sum up to rounding; switch this off for results bit for bit equal to plain
    /// data parallelism then. Level 1 keeps whole gradients anyway: switching it on there is
    /// an error.
    pub fn set_reduce_during_backward(&mut self, on: bool) -> Result<()> {
        if let Some(reducer) = self.reducer.take() {
            reducer.detach();
        }
        if !on {
            return Ok(());
        }
        if self.level == ShardLevel::OptimizerState {
            return Err(Error::InvalidArgument {
                op: "ShardedOptimizer::set_reduce_during_backward",
                msg: "level 1 keeps the whole gradients' mean on the parameters: there is \
                      nothing to reduce early"
                    .into(),
            });
        }
        let buckets: Vec<_> = (0..self.buckets.len())
            .filter(|&i| !self.unit_bucket[i])
            .map(|i| (i, self.buckets[i].clone(), self.shards[i].clone()))
            .collect();
        if !buckets.is_empty() {
            let reducer = BackwardReducer::attach(self.comm.clone(), self.params.clone(), buckets)?;
            reducer.set_overlap(self.overlap);
            self.reducer = Some(reducer);
        }
        Ok(())
    }

    /// Starts each bucket's reduction during the backward pass and lets the pass go on
    /// computing while the exchange runs (`true`; on a communicator that runs started
    /// collectives in the background, MPI's: [`Communicator::start_reduce_scatter`]), or waits
    /// for each (`false`, the default). The results are the same bits either way; the
    /// reductions are settled at [`ShardedOptimizer::sync_gradients`]. It pays where the
    /// exchange has resources of its own (a network, free cores); where the ranks' compute
    /// already takes every core, the exchange's thread competes with it (measured in
    /// docs/DISTRIBUTED.md). Every rank must choose the same. Only for the reductions during
    /// backward ([`ShardedOptimizer::set_reduce_during_backward`], levels 2 and 3).
    pub fn set_overlap_reductions(&mut self, on: bool) {
        self.overlap = on;
        if let Some(reducer) = &self.reducer {
            reducer.set_overlap(on);
        }
    }

    /// Whether the reductions during backward are started rather than awaited
    /// ([`ShardedOptimizer::set_overlap_reductions`]).
    pub fn overlaps_reductions(&self) -> bool {
        self.overlap
    }

    /// Whether gradients are reduced during the backward pass
    /// ([`ShardedOptimizer::set_reduce_during_backward`]).
    pub fn reduces_during_backward(&self) -> bool {
        self.reducer.is_some()
    }

    /// The most bytes of gradients of the parameters outside units held at once during the
    /// backward passes so far (whole gradients not yet reduced, and the reduced shares'
    /// gradients), when reduced during backward
    /// ([`ShardedOptimizer::set_reduce_during_backward`]); `None` otherwise (or before the
    /// first pass): then every whole gradient exists at the end of a pass.
    pub fn peak_gradient_bytes(&self) -> Option<usize> {
        self.reducer.as_ref().and_then(|r| r.peak_held_bytes())
    }

    /// The global L2 norm of the reduced gradients (a collective, after
    /// [`ShardedOptimizer::sync_gradients`]): what `clip::grad_norm` gives on the whole mean.
    pub fn grad_norm(&self) -> Result<f64> {
        grad_norm_across(&self.shards, &*self.comm)
    }

    /// Clips the reduced gradients to a global L2 norm of `max_norm` (a collective, after
    /// [`ShardedOptimizer::sync_gradients`]); returns the norm before clipping. For several
    /// sharded optimizers clipped together, use `clip::clip_grad_norm_across` on all their
    /// [`ShardedOptimizer::shards`].
    pub fn clip_grad_norm(&self, max_norm: f64) -> Result<f64> {
        clip_grad_norm_across(&self.shards, max_norm, &*self.comm)
    }

    /// Bytes of parameters, gradients and optimizer state this rank holds at most during a
    /// step, not counting communication buffers (about one bucket, at every level) nor the
    /// running sums autograd keeps of gradients not yet complete. At level 1 backward leaves
    /// the whole gradients on the parameters (they are reduced after it), so the peak is at its
    /// end: the whole parameters and gradients, this rank's shares of the parameters and the
    /// wrapped optimizer's state (the shares' gradients are views of the reduced whole
    /// gradients). At levels 2 and 3 the gradients outside units count as measured
    /// ([`ShardedOptimizer::peak_gradient_bytes`]: reduced a bucket at a time during backward,
    /// a rank holds one or a few buckets of whole gradients at once); before the first pass,
    /// or reduced after backward, as all of them at its end.
    pub fn peak_state_bytes(&self) -> usize {
        let bytes = |v: &Var<B>| v.numel() * v.dtype().size_in_bytes();
        let whole: usize = self.params.iter().map(|(_, v)| bytes(v)).sum();
        let shares: usize = self.shards.iter().map(bytes).sum();
        let state: usize = self
            .inner
            .state()
            .iter()
            .map(|(_, t)| t.numel() * t.dtype().size_in_bytes())
            .sum();
        let unit_whole: usize = self
            .buckets
            .iter()
            .zip(&self.unit_bucket)
            .filter(|(_, &unit)| unit)
            .map(|(b, _)| b.numel * b.dtype.size_in_bytes())
            .sum();
        let root_whole = whole - unit_whole;
        let unit_shares: usize = self
            .shards
            .iter()
            .zip(&self.unit_bucket)
            .filter(|(_, &unit)| unit)
            .map(|(v, _)| bytes(v))
            .sum();
        let measured = self.peak_gradient_bytes();
        match (self.level, measured) {
            (ShardLevel::Replicated | ShardLevel::OptimizerState, _) => 2 * whole + shares + state,
            // Reduced during backward: the parameters (outside units whole, the rest as
            // shares), the state, the most gradients outside units held at once (measured),
            // and the units' reduced gradients (shares; add `ShardedUnits::peak_unit_bytes`
            // once for all groups).
            (_, Some(held)) => root_whole + shares + state + held + unit_shares,
            // Reduced after backward: every whole gradient outside the units at its end, the
            // shares' gradients made as they are dropped (the units' gradients are shares).
            (_, None) => 2 * root_whole + shares + unit_shares + state,
        }
    }

    /// Every parameter takes its value from the ranks' updated shares (a collective).
    fn gather_parameters(&self) -> Result<()> {
        no_grad(|| {
            let buckets = self.buckets.iter().zip(&self.shards).zip(&self.unit_bucket);
            for ((bucket, shard), _) in buckets.filter(|(_, &unit)| !unit) {
                let flat = self.comm.all_gather(&shard.value())?;
                for (index, piece) in bucket.pieces(&self.params, &flat)? {
                    self.params[index].1.set_value(piece.contiguous()?)?;
                }
            }
            Ok(())
        })
    }

    /// Whether `key` names an entry of a share (`"bucket<i>.<entry>"`, no parameter of that
    /// name).
    fn is_share_key(&self, key: &str) -> bool {
        key.split_once('.').is_some_and(|(head, _)| {
            head.strip_prefix("bucket")
                .and_then(|i| i.parse::<usize>().ok())
                .is_some_and(|i| i < self.buckets.len())
                && !self.params.iter().any(|(name, _)| name == head)
        })
    }

    /// The wrapped optimizer's state, consolidated: each bucket's shares of a rank-1 entry
    /// all-gathered and cut into its parameters, a scalar entry (a step count) given to each.
    fn consolidated_state(&self) -> Result<Vec<(String, Tensor<B>)>> {
        let mut out = Vec::new();
        self.visit_buckets_consolidated(false, &mut |part| {
            out.extend(part);
            Ok(())
        })?;
        Ok(out)
    }

    /// The consolidated state one bucket at a time (a collective: each bucket's shares are
    /// gathered to rank 0, `root_only`, or all-gathered): `visit` gets every parameter's
    /// entries of that bucket, then the flat bucket is dropped; with `root_only` the other
    /// ranks are visited as often, with the bucket's replicated entries (step counts) only.
    /// After an error of `visit` the gathers go on (every rank makes the same calls) without
    /// visiting; the error is returned at the end.
    fn visit_buckets_consolidated(
        &self,
        root_only: bool,
        visit: &mut ConsolidatedVisitor<'_, B>,
    ) -> Result<()> {
        let mut failed = None;
        for (i, entries) in self.state_by_bucket()? {
            let bucket = &self.buckets[i];
            let mut part = Vec::new();
            for (entry, tensor) in entries {
                if tensor.rank() == 0 {
                    for &index in &bucket.params {
                        part.push((format!("{}.{entry}", self.params[index].0), tensor.clone()));
                    }
                    continue;
                }
                let flat = if root_only {
                    match self.comm.gather(&tensor, 0)? {
                        Some(flat) => flat,
                        None => continue,
                    }
                } else {
                    self.comm.all_gather(&tensor)?
                };
                for (index, piece) in bucket.pieces(&self.params, &flat)? {
                    let name = format!("{}.{entry}", self.params[index].0);
                    part.push((name, piece.contiguous()?));
                }
            }
            if failed.is_none() {
                failed = visit(part).err();
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// This rank's pieces of the parameters and of the wrapped optimizer's state (what it
    /// writes into a sharded checkpoint). A unit's parameters are read from this rank's share
    /// unless they are held whole on every rank: then from the parameters (what
    /// [`ShardedUnits::release_all`] would take the shares from).
    fn own_pieces(&self) -> Result<LocalShards<B>> {
        let held = match &self.units {
            Some(units) => units.is_held_everywhere(),
            None => true,
        };
        let piece = |index: usize, name: String, offset: usize, values: Tensor<B>| TensorPiece {
            name,
            dims: self.params[index].1.dims().to_vec(),
            offset,
            values,
        };
        let mut out = LocalShards {
            covered: self.params.iter().map(|(name, _)| name.clone()).collect(),
            parameters: Vec::new(),
            state: Vec::new(),
            replicated_state: Vec::new(),
        };
        for (i, (bucket, shard)) in self.buckets.iter().zip(&self.shards).enumerate() {
            let values = if self.unit_bucket[i] && !held {
                shard.value()
            } else {
                bucket.share(&self.params, |v| Ok(v.value()))?
            };
            for (index, offset, values) in bucket.share_pieces(&self.params, &values)? {
                let name = self.params[index].0.clone();
                out.parameters.push(piece(index, name, offset, values));
            }
        }
        for (i, entries) in self.state_by_bucket()? {
            let bucket = &self.buckets[i];
            for (entry, tensor) in entries {
                if tensor.rank() == 0 {
                    for &index in &bucket.params {
                        let key = format!("{}.{entry}", self.params[index].0);
                        out.replicated_state.push((key, tensor.clone()));
                    }
                    continue;
                }
                for (index, offset, values) in bucket.share_pieces(&self.params, &tensor)? {
                    let key = format!("{}.{entry}", self.params[index].0);
                    out.state.push(piece(index, key, offset, values));
                }
            }
        }
        Ok(out)
    }

    /// The wrapped optimizer's state by bucket: `"bucket<i>.<entry>"` keys split into `i` and
    /// `entry`.
    fn state_by_bucket(&self) -> Result<BTreeMap<usize, NamedTensors<B>>> {
        let mut by_bucket: BTreeMap<usize, NamedTensors<B>> = BTreeMap::new();
        for (key, tensor) in self.inner.state() {
            let (bucket, entry) = key
                .strip_prefix("bucket")
                .and_then(|rest| rest.split_once('.'))
                .and_then(|(i, entry)| Some((i.parse::<usize>().ok()?, entry.to_string())))
                .ok_or_else(|| {
                    Error::checkpoint(format!(
                        "the sharded optimizer's state has an unexpected key {key:?}"
                    ))
                })?;
            if bucket >= self.buckets.len() {
                return Err(Error::checkpoint(format!(
                    "the sharded optimizer has no bucket {bucket}"
                )));
            }
            by_bucket.entry(bucket).or_default().push((entry, tensor));
        }
        Ok(by_bucket)
    }

    /// This rank's shares of a consolidated state (per-parameter keys, read from `source`: only
    /// the ranges of this rank's shares are read), under the wrapped optimizer's names.
    fn shard_state(&self, source: &dyn StateSource<B>) -> Result<Vec<(String, Tensor<B>)>> {
        const OP: &str = "ShardedOptimizer::load_state";
        let invalid = |msg: String| Error::InvalidArgument { op: OP, msg };
        let keys = source.keys();
        let mut used = 0;
        let mut out = Vec::new();
        for (i, bucket) in self.buckets.iter().enumerate() {
            // The entries each parameter of the bucket has, by entry name.
            let mut entry_names: Vec<Vec<String>> = Vec::new();
            for &index in &bucket.params {
                let prefix = format!("{}.", self.params[index].0);
                let own: Vec<String> = keys
                    .iter()
                    .filter_map(|k| k.strip_prefix(prefix.as_str()))
                    .filter(|rest| !rest.contains('.'))
                    .map(str::to_string)
                    .collect();
                entry_names.push(own);
            }
            let first = entry_names[0].clone();
            if let Some(pos) = entry_names.iter().position(|k| *k != first) {
                return Err(invalid(format!(
                    "parameters {:?} and {:?} share a bucket but have different state entries \
                     ({first:?} and {:?}): a sharded optimizer steps a bucket's parameters \
                     together",
                    self.params[bucket.params[0]].0,
                    self.params[bucket.params[pos]].0,
                    entry_names[pos]
                )));
            }
            for entry in &first {
                let key_of = |index: usize| format!("{}.{entry}", self.params[index].0);
                used += bucket.params.len();
                let spec = |index: usize| {
                    let key = key_of(index);
                    source
                        .spec(&key)
                        .ok_or_else(|| invalid(format!("state key {key:?} is missing")))
                };
                let (dims, _) = spec(bucket.params[0])?;
                if dims.is_empty() {
                    // A scalar (a step count): the same for every parameter of the bucket.
                    let sample = source.read(&key_of(bucket.params[0]))?;
                    let value = sample.to_scalar_f64()?;
                    for &index in &bucket.params[1..] {
                        if source.read(&key_of(index))?.to_scalar_f64()? != value {
                            return Err(invalid(format!(
                                "{entry} differs between parameters {:?} and {:?} of one bucket",
                                self.params[bucket.params[0]].0, self.params[index].0
                            )));
                        }
                    }
                    out.push((format!("{}.{entry}", shard_name(i)), sample));
                    continue;
                }
                // Every parameter's entry must have its shape and dtype, read or not.
                for &index in &bucket.params {
                    let var = &self.params[index].1;
                    let (dims, dtype) = spec(index)?;
                    if dims != var.dims() || dtype != var.dtype() {
                        return Err(invalid(format!(
                            "{}: expected a {} tensor of shape {}, got a {dtype} tensor of dims \
                             {dims:?}",
                            key_of(index),
                            var.dtype(),
                            var.shape()
                        )));
                    }
                }
                let (lo, hi) = (bucket.shard_start, bucket.shard_start + bucket.shard_len);
                let mut pieces = Vec::new();
                let mut offset = 0;
                let mut backend = None;
                for &index in &bucket.params {
                    let var = &self.params[index].1;
                    let n = var.numel();
                    let (a, b) = (offset.max(lo), (offset + n).min(hi));
                    if a < b {
                        pieces.push(source.read_range(&key_of(index), a - offset, b - a)?);
                    }
                    backend.get_or_insert_with(|| var.value().backend().clone());
                    offset += n;
                }
                let covered: usize = pieces.iter().map(Tensor::numel).sum();
                if covered < bucket.shard_len {
                    let backend = backend.expect("a bucket holds at least one parameter");
                    pieces.push(Tensor::zeros(
                        [bucket.shard_len - covered],
                        bucket.dtype,
                        &backend,
                    )?);
                }
                let share = match pieces.len() {
                    1 => pieces.pop().expect("one piece"),
                    _ => Tensor::cat(&pieces.iter().collect::<Vec<_>>(), 0)?,
                };
                out.push((format!("{}.{entry}", shard_name(i)), share));
            }
        }
        if used != keys.len() {
            let unexpected = keys
                .iter()
                .find(|k| {
                    !self.params.iter().any(|(name, _)| {
                        k.strip_prefix(name.as_str())
                            .and_then(|rest| rest.strip_prefix('.'))
                            .is_some_and(|rest| !rest.contains('.'))
                    })
                })
                .cloned()
                .unwrap_or_else(|| format!("{keys:?}"));
            return Err(invalid(format!("unexpected state key {unexpected:?}")));
        }
        Ok(out)
    }
}

impl<B: Backend, O: Optimizer<B>> Optimizer<B> for ShardedOptimizer<B, O> {
    fn step(&mut self) -> Result<()> {
        if !self.synced {
            self.sync_gradients()?;
        }
        // The shares start from the parameters' current values: whatever set them since the
        // last step (a restored checkpoint, a loaded model) is what gets updated.
        for (i, (bucket, shard)) in self.buckets.iter().zip(&self.shards).enumerate() {
            // A unit's share is where its parameters live between uses.
            if !self.unit_bucket[i] {
                shard.set_value(bucket.share(&self.params, |v| Ok(v.value()))?)?;
            }
        }
        self.inner.step()?;
        self.synced = false;
        self.gather_parameters()
    }

    fn zero_grad(&mut self) {
        for (_, var) in &self.params {
            var.zero_grad();
        }
        self.inner.zero_grad();
        if let Some(reducer) = &self.reducer {
            reducer.reset();
        }
        self.synced = false;
    }

    fn learning_rate(&self) -> f64 {
        self.inner.learning_rate()
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.inner.set_learning_rate(lr);
    }

    /// The consolidated state after [`Optimizer::prepare_checkpoint`]; otherwise this rank's
    /// shares under the wrapped optimizer's names (`"bucket0.exp_avg"`...).
    fn state(&self) -> Vec<(String, Tensor<B>)> {
        let gathered = self.gathered.lock().unwrap_or_else(|p| p.into_inner());
        match &*gathered {
            Some(state) => state.clone(),
            None => self.inner.state(),
        }
    }

    /// Takes a consolidated state (per-parameter names, as a plain optimizer of the same kind
    /// saves it) and keeps this rank's shares; or this rank's own shares (the unprepared
    /// [`Optimizer::state`], e.g. to roll back). Not a collective.
    fn load_state(&mut self, state: &[(String, Tensor<B>)]) -> Result<()> {
        if !state.is_empty() && state.iter().all(|(k, _)| self.is_share_key(k)) {
            // This rank's own shares, as [`Optimizer::state`] returns them unprepared.
            return self.inner.load_state(state);
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some((key, _)) = state.iter().find(|(k, _)| !seen.insert(k.as_str())) {
            return Err(Error::InvalidArgument {
                op: "ShardedOptimizer::load_state",
                msg: format!("state key {key:?} appears twice"),
            });
        }
        let shares = self.shard_state(&state)?;
        self.inner.load_state(&shares)
    }

    /// [`Optimizer::load_state`] of a consolidated state read from `source`: only the ranges
    /// of this rank's shares are read.
    fn load_state_from(&mut self, source: &dyn StateSource<B>) -> Result<()> {
        let shares = self.shard_state(source)?;
        self.inner.load_state(&shares)
    }

    fn prepare_checkpoint(&self) -> Result<()> {
        let state = self.consolidated_state()?;
        *self.gathered.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
        Ok(())
    }

    fn finish_checkpoint(&self) {
        *self.gathered.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// One bucket's consolidated state at a time, gathered to rank 0 (a collective; see the
    /// trait).
    fn visit_consolidated_state(&self, visit: &mut ConsolidatedVisitor<'_, B>) -> Result<()> {
        self.visit_buckets_consolidated(true, visit)
    }

    fn local_shards(&self) -> Result<Option<LocalShards<B>>> {
        self.own_pieces().map(Some)
    }

    fn gradient_norm(&self, _params: &[Var<B>]) -> Result<f64> {
        self.grad_norm()
    }
}

impl<B: Backend, O> Drop for ShardedOptimizer<B, O> {
    /// Takes the gradient-ready hooks off the parameters.
    fn drop(&mut self) {
        if let Some(reducer) = &self.reducer {
            reducer.detach();
        }
    }
}
