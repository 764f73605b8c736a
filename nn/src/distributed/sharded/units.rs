//! [`ShardedUnits`]: the parameters of marked sub-modules ("units", e.g. each transformer
//! block) kept as 1/N shares between uses, gathered whole for the unit's forward pass and again
//! for its backward pass (sharding level 3, PyTorch FSDP's `FULL_SHARD`).

use super::flat::FlatBucket;
use super::prefetch::{Prefetched, UnitPrefetch};
use crate::distributed::communicator::{check_root, Communicator, Reduction};
use crate::layers::KvCache;
use crate::module::placeholder::{check_have_values, placeholder};
use crate::module::{Forward, Module};
use std::sync::{Arc, Mutex, OnceLock};
use tessera_autograd::{enable_grad, is_grad_enabled, no_grad, Var};
use tessera_core::{Backend, Error, Generator, Result, Tensor};

/// The name [`ShardedUnits::run_without_graph`]'s errors give.
const RUN_WITHOUT_GRAPH: &str = "ShardedUnits::run_without_graph";

/// One optimizer group's parameters of a unit, laid out flat, and this rank's share of them.
pub(crate) struct UnitPart<B: Backend> {
    /// The parameters (the model's own `Var`s).
    pub params: Vec<(String, Var<B>)>,
    /// Their flat layout and this rank's share of it.
    pub layout: FlatBucket,
    /// This rank's share: the value the optimizer updates, the gradient backward leaves.
    pub shard: Var<B>,
}

/// The units of a model whose parameters are sharded between uses (level 3): made from the
/// units' parameter-name prefixes, filled by the
/// [`ShardedOptimizer`](crate::distributed::ShardedOptimizer)s of level 3
/// ([`ShardedOptimizer::with_units`](crate::distributed::ShardedOptimizer::with_units)) and run by
/// the model's forward pass ([`ShardedUnits::run`], e.g. through
/// [`crate::gpt::Gpt::shard_blocks`]).
///
/// **How a unit runs** during training: its parameters are all-gathered from the ranks' shares,
/// its forward pass runs *without* recording a graph, and the parameters are released (each
/// becomes a one-element placeholder broadcast to its shape). Its backward pass gathers them
/// again, runs the forward pass again (with the dropout streams it started from, so the masks
/// are the same) and back-propagates through it, reduce-scatters the parameters' gradients
/// into this rank's share, and releases them. So a rank holds at most one unit's whole
/// parameters and gradients at a time, for one extra forward pass per unit and step
/// (activation checkpointing at unit boundaries, as FSDP is usually run).
///
/// **Prefetch** ([`ShardedUnits::set_prefetch`], off by default): a unit's pass first starts
/// the gather of the unit predicted to run next (learned from the previous forward pass; the
/// reverse order in backward), so that the exchange runs while the unit computes, on a
/// communicator whose [`Communicator::start_all_gather`] runs in the background (MPI's). It
/// costs one more unit's whole parameters held at once.
///
/// Outside training steps, [`ShardedUnits::gather_all`] holds every parameter whole on every
/// rank (to restore a checkpoint, or evaluate on each rank) until [`ShardedUnits::release_all`],
/// which takes each rank's shares from the values the parameters then hold. To run the whole
/// model on one rank only (rank 0 samples), [`ShardedUnits::hold_on`] gathers to that rank
/// alone: the others hold no more than in training. To write it,
/// [`ShardedUnits::visit_whole_on`] hands one unit at a time to one rank (what
/// [`crate::run::save_gathered_checkpoint`] and [`crate::run::save_gathered_model`] do).
pub struct ShardedUnits<B: Backend> {
    comm: Arc<dyn Communicator<B>>,
    prefixes: Vec<String>,
    parts: Mutex<Vec<Vec<Arc<UnitPart<B>>>>>,
    hold: Mutex<Hold>,
    prefetch: Mutex<UnitPrefetch<B>>,
}

/// What [`ShardedUnits::visit_whole_on`] calls on the root: a unit parameter (the model's
/// own `Var`) and its whole value.
pub type WholeVisitor<'a, B> = dyn FnMut(&Var<B>, &Tensor<B>) -> Result<()> + 'a;

/// Where the units' parameters are held whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    /// Nowhere: each rank keeps its shares (training).
    Released,
    /// On every rank ([`ShardedUnits::gather_all`]).
    Everywhere,
    /// On this rank only, for reading ([`ShardedUnits::hold_on`]).
    On(usize),
    /// Each unit on its owner only, for decoding ([`ShardedUnits::hold_by_owners`]).
    ByOwner,
}

impl<B: Backend> ShardedUnits<B> {
    /// Units named by parameter-name prefixes (unit `i` holds the parameters named
    /// `"{prefixes[i]}.…"`), over `comm`. The parameters start whole ("held").
    pub fn new(comm: Arc<dyn Communicator<B>>, prefixes: Vec<String>) -> Result<Arc<Self>> {
        for (i, a) in prefixes.iter().enumerate() {
            if a.is_empty() || prefixes[..i].contains(a) {
                return Err(Error::InvalidArgument {
                    op: "ShardedUnits::new",
                    msg: format!("unit prefixes must be non-empty and distinct, got {prefixes:?}"),
                });
            }
        }
        let parts = Mutex::new(prefixes.iter().map(|_| Vec::new()).collect());
        let prefetch = Mutex::new(UnitPrefetch::new(prefixes.len()));
        Ok(Arc::new(ShardedUnits {
            comm,
            prefixes,
            parts,
            hold: Mutex::new(Hold::Everywhere),
            prefetch,
        }))
    }

    /// The number of units.
    pub fn len(&self) -> usize {
        self.prefixes.len()
    }

    /// Whether there is no unit.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// The units' parameter-name prefixes, in order.
    pub fn prefixes(&self) -> &[String] {
        &self.prefixes
    }

    /// Starts each unit's gather while the unit before it computes (see the
    /// [type docs](ShardedUnits)), or not (the default). Every rank must choose the same.
    pub fn set_prefetch(&self, enabled: bool) {
        self.prefetch_state().enabled = enabled;
    }

    /// Whether gathers are prefetched ([`ShardedUnits::set_prefetch`]).
    pub fn prefetches(&self) -> bool {
        self.prefetch_state().enabled
    }

    /// The communicator.
    pub fn communicator(&self) -> &Arc<dyn Communicator<B>> {
        &self.comm
    }

    /// The unit a parameter belongs to (the longest prefix that names it), if any.
    pub fn unit_of(&self, name: &str) -> Option<usize> {
        self.prefixes
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                name.strip_prefix(p.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
            })
            .max_by_key(|(_, p)| p.len())
            .map(|(i, _)| i)
    }

    /// Adds an optimizer group's part of unit `unit`.
    pub(crate) fn register(&self, unit: usize, part: Arc<UnitPart<B>>) {
        self.lock()[unit].push(part);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<Arc<UnitPart<B>>>>> {
        self.parts.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn prefetch_state(&self) -> std::sync::MutexGuard<'_, UnitPrefetch<B>> {
        self.prefetch.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hold_state(&self) -> Hold {
        *self.hold.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_hold(&self, hold: Hold) {
        *self.hold.lock().unwrap_or_else(|p| p.into_inner()) = hold;
    }

    fn parts_of(&self, unit: usize) -> Result<Vec<Arc<UnitPart<B>>>> {
        self.lock()
            .get(unit)
            .cloned()
            .ok_or_else(|| Error::InvalidArgument {
                op: "ShardedUnits::run",
                msg: format!("unit {unit} of {} does not exist", self.prefixes.len()),
            })
    }

    /// Whether this rank holds every parameter whole ([`ShardedUnits::gather_all`], or
    /// [`ShardedUnits::hold_on`] this rank).
    pub fn is_held(&self) -> bool {
        match self.hold_state() {
            Hold::Released | Hold::ByOwner => false,
            Hold::Everywhere => true,
            Hold::On(root) => root == self.comm.rank(),
        }
    }

    /// Whether every rank holds every parameter whole ([`ShardedUnits::gather_all`]): the
    /// values [`ShardedUnits::release_all`] will take the shares from.
    pub(crate) fn is_held_everywhere(&self) -> bool {
        self.hold_state() == Hold::Everywhere
    }

    /// The rank that alone holds the parameters whole ([`ShardedUnits::hold_on`]), if any.
    pub fn held_only_on(&self) -> Option<usize> {
        match self.hold_state() {
            Hold::On(root) => Some(root),
            _ => None,
        }
    }

    /// Gives every parameter of `parts` its whole value, all-gathered (a collective).
    fn gather(&self, parts: &[Arc<UnitPart<B>>]) -> Result<()> {
        for part in parts {
            let flat = self.comm.all_gather(&part.shard.value())?;
            Self::fill(part, &flat)?;
        }
        Ok(())
    }

    /// Gives every parameter of `part` its piece of the whole flat vector `flat`.
    fn fill(part: &UnitPart<B>, flat: &Tensor<B>) -> Result<()> {
        for (index, piece) in part.layout.pieces(&part.params, flat)? {
            part.params[index].1.set_value(piece.contiguous()?)?;
        }
        Ok(())
    }

    /// Gives unit `unit`'s parameters (`parts`) their whole values: from the gather started
    /// ahead for it, or gathered now (a gather started for another unit, or from shares
    /// replaced since, is waited for and dropped). Then, with prefetch on, starts the gather of
    /// `next` (`None`: nothing predicted).
    fn acquire(&self, unit: usize, parts: &[Arc<UnitPart<B>>], next: Option<usize>) -> Result<()> {
        let pending = self.prefetch_state().pending.take();
        match pending {
            Some(prefetched) if prefetched.serves(unit, parts) => {
                for (part, flat) in parts.iter().zip(prefetched.wait()?) {
                    Self::fill(part, &flat)?;
                }
            }
            other => {
                if let Some(wasted) = other {
                    wasted.wait()?;
                }
                self.gather(parts)?;
            }
        }
        match next {
            Some(next) if self.prefetches() => self.start_gather(next),
            _ => Ok(()),
        }
    }

    /// Starts the gather of unit `unit`'s shares and keeps its handle for the unit's next use.
    fn start_gather(&self, unit: usize) -> Result<()> {
        let parts = self.parts_of(unit)?;
        let mut gathers = Vec::with_capacity(parts.len());
        for part in &parts {
            let share = part.shard.value();
            let pending = self.comm.clone().start_all_gather(&share)?;
            gathers.push((share, pending));
        }
        self.prefetch_state().pending = Some(Prefetched { unit, gathers });
        Ok(())
    }

    /// Waits for and drops a gather started ahead (before the parameters are gathered or
    /// replaced another way), so that no stale gather is left behind.
    fn drop_prefetched(&self) -> Result<()> {
        let pending = self.prefetch_state().pending.take();
        match pending {
            Some(wasted) => wasted.wait().map(drop),
            None => Ok(()),
        }
    }

    /// Replaces every parameter of `parts` by a one-element placeholder of its shape (its
    /// memory is released once nothing else holds it).
    fn release(parts: &[Arc<UnitPart<B>>]) -> Result<()> {
        for part in parts {
            for (_, var) in &part.params {
                let value = var.value();
                let one = placeholder(var.dims(), &value)?;
                drop(value);
                var.set_value(one)?;
            }
        }
        Ok(())
    }

    /// Holds every unit's parameters whole on every rank until [`ShardedUnits::release_all`]
    /// (a collective: to restore a checkpoint, or evaluate on every rank). Nothing to do when
    /// they are already held everywhere; held on one rank ([`ShardedUnits::hold_on`]), that
    /// hold ends first.
    pub fn gather_all(&self) -> Result<()> {
        match self.hold_state() {
            Hold::Everywhere => return Ok(()),
            Hold::On(_) | Hold::ByOwner => self.release_all()?,
            Hold::Released => {}
        }
        self.drop_prefetched()?;
        let parts = self.all_parts();
        self.set_hold(Hold::Everywhere);
        self.gather(&parts)
    }

    /// Holds every unit's parameters whole on rank `root` alone, for reading, until
    /// [`ShardedUnits::release_all`] (a collective, [`Communicator::gather`]): what rank 0
    /// needs to write the model or sample from it, without the other ranks holding more than
    /// their shares. Meanwhile only `root` may run the model; [`ShardedUnits::run`] elsewhere
    /// is an error. What `root` writes into the parameters is dropped at the release (the
    /// other ranks could not take their shares from it): to change the model, use
    /// [`ShardedUnits::gather_all`]. Nothing to do when they are held everywhere already.
    pub fn hold_on(&self, root: usize) -> Result<()> {
        check_root("ShardedUnits::hold_on", root, self.comm.world_size())?;
        match self.hold_state() {
            Hold::Everywhere => return Ok(()),
            Hold::On(held) if held == root => return Ok(()),
            Hold::On(_) | Hold::ByOwner => self.release_all()?,
            Hold::Released => {}
        }
        self.drop_prefetched()?;
        let parts = self.all_parts();
        // Set first: after a failed gather, the release frees what was filled.
        self.set_hold(Hold::On(root));
        for part in &parts {
            if let Some(flat) = self.comm.gather(&part.shard.value(), root)? {
                Self::fill(part, &flat)?;
            }
        }
        Ok(())
    }

    /// Holds each unit's parameters whole on its owner alone ([`ShardedUnits::owner_of`]: the
    /// units split into contiguous runs, one run per rank) until [`ShardedUnits::release_all`]
    /// (a collective, [`Communicator::gather`]): pipelined decoding, in which each unit's
    /// inference pass runs on its owner and the other ranks receive its output
    /// ([`ShardedUnits::run_without_graph`]), so that a token costs one small broadcast per
    /// unit instead of the gather of every unit. A rank holds about its shares' worth of
    /// parameters more (its units whole). Training ([`ShardedUnits::run`]) is refused
    /// meanwhile, and what an owner writes into its parameters is dropped at the release.
    /// Nothing to do when they are held everywhere already.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tessera_cpu::Cpu;
    /// use tessera_nn::distributed::{LocalCommunicator, ShardedUnits};
    /// # fn main() -> tessera_core::Result<()> {
    /// let comm = Arc::new(LocalCommunicator::new());
    /// let units = ShardedUnits::<Cpu>::new(comm, vec!["h.0".into(), "h.1".into()])?;
    /// // One rank owns every unit.
    /// assert_eq!((units.owner_of(0), units.owner_of(1)), (0, 0));
    /// # Ok(()) }
    /// ```
    pub fn hold_by_owners(&self) -> Result<()> {
        match self.hold_state() {
            Hold::Everywhere | Hold::ByOwner => return Ok(()),
            Hold::On(_) => self.release_all()?,
            Hold::Released => {}
        }
        self.drop_prefetched()?;
        // Set first: after a failed gather, the release frees what was filled.
        self.set_hold(Hold::ByOwner);
        for unit in 0..self.len() {
            let owner = self.owner_of(unit);
            for part in &self.parts_of(unit)? {
                if let Some(flat) = self.comm.gather(&part.shard.value(), owner)? {
                    Self::fill(part, &flat)?;
                }
            }
        }
        Ok(())
    }

    /// The rank that holds unit `unit` whole under [`ShardedUnits::hold_by_owners`]: the
    /// units are split into one contiguous run per rank, as even as can be (with more ranks
    /// than units, some own none).
    pub fn owner_of(&self, unit: usize) -> usize {
        unit * self.comm.world_size() / self.len().max(1)
    }

    /// Whether this rank computes unit `unit`'s inference passes
    /// ([`ShardedUnits::run_without_graph`]): every rank does, except under
    /// [`ShardedUnits::hold_by_owners`], where only the unit's owner does and the others
    /// receive its output (a key/value cache of the unit then skips those positions here).
    pub fn computes_here(&self, unit: usize) -> bool {
        self.hold_state() != Hold::ByOwner || self.owner_of(unit) == self.comm.rank()
    }

    /// Ends a hold: after [`ShardedUnits::gather_all`], takes each rank's shares from the
    /// whole values the parameters hold (those gathered, or written since, e.g. by a restored
    /// checkpoint); after [`ShardedUnits::hold_on`] or [`ShardedUnits::hold_by_owners`], keeps
    /// the shares as they were. Then releases the whole values. Not a collective.
    pub fn release_all(&self) -> Result<()> {
        let hold = self.hold_state();
        let parts = self.all_parts();
        if hold == Hold::Everywhere {
            Self::check_have_values(&parts, "ShardedUnits::release_all")?;
        }
        self.set_hold(Hold::Released);
        match hold {
            Hold::Released => Ok(()),
            Hold::On(root) if root != self.comm.rank() => Ok(()),
            Hold::On(_) | Hold::ByOwner => Self::release(&parts),
            Hold::Everywhere => {
                for part in &parts {
                    let share = part.layout.share(&part.params, |v| Ok(v.value()))?;
                    part.shard.set_value(share)?;
                }
                Self::release(&parts)
            }
        }
    }

    /// An error naming the first parameter of `parts` that holds a placeholder (a deferred
    /// build's, never given values): its share would silently be zeros.
    fn check_have_values(parts: &[Arc<UnitPart<B>>], op: &'static str) -> Result<()> {
        let params = parts.iter().flat_map(|p| &p.params).map(|(n, v)| (n, v));
        let how = "give the units their values with ShardedUnits::initialize";
        check_have_values(params, "", op, how)
    }

    /// Gives the units' parameters their first values one unit at a time, each rank keeping
    /// only its shares: what takes the place of [`ShardedUnits::release_all`] for a model built
    /// without its units' values (e.g. [`crate::gpt::GptConfig::init_deferred`]), so that no
    /// rank ever holds more than one unit whole. A collective. For each unit in order:
    /// `init(unit)` gives its parameters their whole values on every rank (e.g.
    /// [`crate::gpt::Gpt::init_block`]), rank 0's values are broadcast (every rank starts from
    /// rank 0's model, as [`crate::distributed::DistributedDataParallel`] makes it), each rank
    /// takes its shares, and the whole values are released. The units must be held everywhere
    /// (as [`crate::distributed::ShardedOptimizer::with_units`] leaves them); they end
    /// released. When `init` fails, or leaves a placeholder, on any rank, every rank returns an
    /// error.
    pub fn initialize(&self, init: &mut dyn FnMut(usize) -> Result<()>) -> Result<()> {
        const OP: &str = "ShardedUnits::initialize";
        if self.hold_state() != Hold::Everywhere {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: "the units must be held whole everywhere (as with_units leaves them, or \
                      after gather_all)"
                    .into(),
            });
        }
        self.drop_prefetched()?;
        // Set first: after a failure, the units are released, never half held.
        self.set_hold(Hold::Released);
        let world = self.comm.world_size();
        for unit in 0..self.len() {
            let parts = self.parts_of(unit)?;
            let mut outcome = init(unit).and_then(|()| Self::check_have_values(&parts, OP));
            let mut failed = [f64::from(u8::from(outcome.is_err()))];
            if world > 1 {
                self.comm.all_reduce_host(&mut failed, Reduction::Max)?;
            }
            if failed[0] > 0.0 {
                Self::release(&parts)?;
                if outcome.is_ok() {
                    outcome = Err(Error::InvalidArgument {
                        op: OP,
                        msg: format!("another rank failed to initialize unit {unit}"),
                    });
                }
                return outcome;
            }
            for part in &parts {
                let mut flat = part
                    .layout
                    .flatten(&part.params, world, |v| Ok(v.value()))?;
                Self::release(std::slice::from_ref(part))?;
                if world > 1 {
                    self.comm.broadcast(&mut flat, 0)?;
                }
                part.shard.set_value(part.layout.shard_of(&flat)?)?;
            }
        }
        Ok(())
    }

    /// Hands every unit's parameters whole to `visit` on rank `root`, one unit's optimizer
    /// group at a time, to write them without holding the model whole anywhere (a collective):
    /// released, each part's shares are gathered to `root` ([`Communicator::gather`]) and
    /// dropped after the visit; held whole there ([`ShardedUnits::gather_all`], or
    /// [`ShardedUnits::hold_on`] `root`), the parameters are visited as they are, without
    /// communication. The other ranks send their shares and are not visited. An error of
    /// `visit` is returned after the last part (the gathers still run on every rank) and
    /// `visit` is not called after it; held on another rank than `root`, it is an error on
    /// every rank.
    pub fn visit_whole_on(&self, root: usize, visit: &mut WholeVisitor<'_, B>) -> Result<()> {
        const OP: &str = "ShardedUnits::visit_whole_on";
        check_root(OP, root, self.comm.world_size())?;
        let on_root = self.comm.rank() == root;
        let parts = self.all_parts();
        let held = match self.hold_state() {
            // Held by owners, the shares are as released ones: gathered from them.
            Hold::Released | Hold::ByOwner => false,
            Hold::Everywhere => true,
            Hold::On(held) if held == root => true,
            Hold::On(held) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    msg: format!(
                        "the units are held whole on rank {held} only, not on rank {root}; \
                         release_all first"
                    ),
                })
            }
        };
        if !held {
            self.drop_prefetched()?;
        }
        let mut failed = None;
        for part in &parts {
            // (index in `part.params`, whole value), on the root only.
            let whole: Vec<(usize, Tensor<B>)> = match (held, on_root) {
                (true, true) => (part.params.iter().map(|(_, v)| v.value()))
                    .enumerate()
                    .collect(),
                (true, false) => Vec::new(),
                (false, _) => match self.comm.gather(&part.shard.value(), root)? {
                    Some(flat) => part.layout.pieces(&part.params, &flat)?,
                    None => Vec::new(),
                },
            };
            for (index, value) in &whole {
                if failed.is_none() {
                    failed = visit(&part.params[*index].1, value).err();
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// The ids ([`Var::id`]) of every parameter a unit holds.
    pub(crate) fn parameter_ids(&self) -> std::collections::BTreeSet<u64> {
        let parts = self.all_parts();
        parts
            .iter()
            .flat_map(|p| p.params.iter().map(|(_, v)| v.id()))
            .collect()
    }

    /// Every unit's parts.
    fn all_parts(&self) -> Vec<Arc<UnitPart<B>>> {
        self.lock().iter().flatten().cloned().collect()
    }

    /// Runs `module`, unit `unit` of the model, on `x` (see the [type docs](ShardedUnits)):
    /// gathered, run, released, and the same again in backward. When the parameters are held
    /// whole ([`ShardedUnits::gather_all`]) it is `module.forward(x)`. A collective when they
    /// are not: every rank runs the same units in the same order.
    pub fn run<M>(self: &Arc<Self>, unit: usize, x: &Var<B>, module: &M) -> Result<Var<B>>
    where
        M: Forward<B> + Module<B> + Clone + Send + Sync + 'static,
    {
        if self.is_held() {
            // A deferred build's unit (never released yet) may still hold placeholders.
            let how = "give the units their values with ShardedUnits::initialize";
            let prefix = (self.prefixes.get(unit)).map_or(String::new(), |p| format!("{p}."));
            let params = module.parameters();
            let params = params.iter().map(|(n, v)| (n, v));
            check_have_values(params, &prefix, "ShardedUnits::run", how)?;
            return module.forward(x);
        }
        self.check_not_held_elsewhere("ShardedUnits::run")?;
        let parts = self.parts_of(unit)?;
        // The dropout streams as they are before the pass: backward replays from them.
        let mut streams: Vec<(String, Generator)> = Vec::new();
        module.visit_random_streams("", &mut |name, s| streams.push((name.to_string(), s.get())));
        let next = self.prefetch_state().forward(unit);
        self.acquire(unit, &parts, next)?;
        let forward = no_grad(|| module.forward(&x.detach()));
        Self::release(&parts)?;
        let y = forward?.value();
        if !is_grad_enabled() {
            return Ok(Var::constant(y));
        }
        let mut parents = vec![x.clone()];
        parents.extend(parts.iter().map(|p| p.shard.clone()));
        let (units, replay, x_value) = (self.clone(), module.clone(), x.value());
        Ok(Var::from_op(y, parents, move |grad| {
            let next = units.prefetch_state().backward(unit);
            units.acquire(unit, &parts, next)?;
            replay.visit_random_streams("", &mut |name, s| {
                if let Some((_, g)) = streams.iter().find(|(n, _)| n == name) {
                    s.set(g.clone());
                }
            });
            let input = Var::leaf(x_value.clone(), true);
            let out = enable_grad(|| replay.forward(&input))?;
            out.backward_with(grad)?;
            let mut grads = vec![input.grad()];
            let world = units.comm.world_size();
            for part in &parts {
                let flat = part.layout.flatten_grads(&part.params, world)?;
                for (_, v) in &part.params {
                    v.set_grad(None);
                }
                grads.push(Some(units.comm.reduce_scatter(&flat, Reduction::Mean)?));
            }
            Self::release(&parts)?;
            Ok(grads)
        }))
    }

    /// Runs `pass`, an inference pass of unit `unit` of the model on its input `x` that records
    /// no graph (e.g. a transformer block's cached step while decoding), and returns its
    /// output, which must have `x`'s shape and dtype. Released, the unit's parameters are
    /// gathered before it (the unit predicted to run next starts gathering too, with prefetch
    /// on) and released after it, as in [`ShardedUnits::run`]'s forward pass, so that a sharded
    /// model decodes with its key/value caches without any rank holding it whole. Held by
    /// owners ([`ShardedUnits::hold_by_owners`]), only the owner runs `pass` and broadcasts its
    /// output to the other ranks, which do not call it ([`ShardedUnits::computes_here`]). Held
    /// whole, it is `pass()`. A collective unless held whole: every rank runs the same units in
    /// the same order, and when `pass` fails on any rank every rank returns an error (this one
    /// its own, or one naming the unit).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tessera_core::Tensor;
    /// use tessera_cpu::Cpu;
    /// use tessera_nn::distributed::{LocalCommunicator, ShardedUnits};
    /// # fn main() -> tessera_core::Result<()> {
    /// let comm = Arc::new(LocalCommunicator::new());
    /// let units = ShardedUnits::<Cpu>::new(comm, vec!["block".into()])?;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], [2], &Cpu::new())?;
    /// // Held whole (as made, before a level-3 optimizer shards them): the pass just runs.
    /// let doubled = units.run_without_graph(0, &x, || x.add(&x))?;
    /// assert_eq!(doubled.to_vec::<f32>()?, vec![2.0, 4.0]);
    /// # Ok(()) }
    /// ```
    pub fn run_without_graph(
        &self,
        unit: usize,
        x: &Tensor<B>,
        pass: impl FnOnce() -> Result<Tensor<B>>,
    ) -> Result<Tensor<B>> {
        if self.hold_state() == Hold::ByOwner {
            return self.run_on_owner(unit, x, pass);
        }
        if self.is_held() {
            return no_grad(pass);
        }
        self.check_not_held_elsewhere(RUN_WITHOUT_GRAPH)?;
        let parts = self.parts_of(unit)?;
        let next = self.prefetch_state().forward(unit);
        let result = (self.acquire(unit, &parts, next)).and_then(|()| no_grad(pass));
        Self::release(&parts)?;
        self.agree_on_failure(unit, result)
    }

    /// `result` of unit `unit`'s pass on this rank, once every rank has learned whether its own
    /// failed (a collective): an error on every rank when any failed, so that no rank leaves
    /// the pass early while the others wait in the next unit's collective.
    fn agree_on_failure(&self, unit: usize, result: Result<Tensor<B>>) -> Result<Tensor<B>> {
        let mut failed = [f64::from(u8::from(result.is_err()))];
        if self.comm.world_size() > 1 {
            self.comm.all_reduce_host(&mut failed, Reduction::Max)?;
        }
        match result {
            Ok(_) if failed[0] > 0.0 => Err(Error::InvalidArgument {
                op: RUN_WITHOUT_GRAPH,
                msg: format!("unit {unit}'s pass failed on another rank"),
            }),
            result => result,
        }
    }

    /// [`ShardedUnits::run_without_graph`] held by owners: the owner runs `pass`, every rank
    /// learns whether it succeeded, and the owner's output is broadcast.
    fn run_on_owner(
        &self,
        unit: usize,
        x: &Tensor<B>,
        pass: impl FnOnce() -> Result<Tensor<B>>,
    ) -> Result<Tensor<B>> {
        if unit >= self.len() {
            return Err(Error::InvalidArgument {
                op: RUN_WITHOUT_GRAPH,
                msg: format!("unit {unit} of {} does not exist", self.len()),
            });
        }
        let owner = self.owner_of(unit);
        let output = if owner == self.comm.rank() {
            no_grad(pass).and_then(|y| {
                if y.dims() != x.dims() || y.dtype() != x.dtype() {
                    return Err(Error::InvalidArgument {
                        op: RUN_WITHOUT_GRAPH,
                        msg: format!(
                            "unit {unit} gave a {} output of shape {} for a {} input of shape \
                             {}: a pass run by its owner alone must keep its input's shape",
                            y.dtype(),
                            y.shape(),
                            x.dtype(),
                            x.shape()
                        ),
                    });
                }
                y.contiguous()
            })
        } else {
            Tensor::zeros(x.dims().to_vec(), x.dtype(), x.backend())
        };
        let mut output = self.agree_on_failure(unit, output)?;
        if self.comm.world_size() > 1 {
            self.comm.broadcast(&mut output, owner)?;
        }
        Ok(output)
    }

    /// An error when the parameters are held whole on another rank only
    /// ([`ShardedUnits::hold_on`]), or each unit on its owner ([`ShardedUnits::hold_by_owners`]),
    /// for a pass that needs every unit gathered on every rank.
    fn check_not_held_elsewhere(&self, op: &'static str) -> Result<()> {
        match self.hold_state() {
            Hold::On(root) => Err(Error::InvalidArgument {
                op,
                msg: format!(
                    "the units are held whole on rank {root} only (hold_on); rank {} runs them \
                     after release_all",
                    self.comm.rank()
                ),
            }),
            Hold::ByOwner => Err(Error::InvalidArgument {
                op,
                msg: "the units are held each on its owner for decoding (hold_by_owners); \
                      train after release_all"
                    .into(),
            }),
            Hold::Released | Hold::Everywhere => Ok(()),
        }
    }

    /// Bytes a unit's pass adds at most: the largest unit's whole parameters and gradients
    /// (every optimizer group's part of it), and with prefetch another unit's parameters.
    pub fn peak_unit_bytes(&self) -> usize {
        let units_held = if self.prefetches() { 3 } else { 2 };
        units_held * self.largest_unit_bytes()
    }

    /// Bytes of the largest unit's whole parameters.
    fn largest_unit_bytes(&self) -> usize {
        self.lock()
            .iter()
            .map(|parts| {
                parts
                    .iter()
                    .flat_map(|p| &p.params)
                    .map(|(_, v)| v.numel() * v.dtype().size_in_bytes())
                    .sum::<usize>()
            })
            .max()
            .unwrap_or(0)
    }
}

/// Sets a model's `slot` to `units`, once, when they are as many as its `count` blocks (called
/// `noun` in the errors): what a model's `shard_*` method does (e.g.
/// [`crate::gpt::Gpt::shard_blocks`]).
pub(crate) fn install_units<B: Backend>(
    slot: &OnceLock<Arc<ShardedUnits<B>>>,
    units: Arc<ShardedUnits<B>>,
    count: usize,
    op: &'static str,
    noun: &str,
) -> Result<()> {
    if units.len() != count {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("{} units for {count} {noun}", units.len()),
        });
    }
    slot.set(units).map_err(|_| Error::InvalidArgument {
        op,
        msg: format!("the {noun} already run as sharded units"),
    })
}

/// One cached (key/value) step of block `unit` of a model on `x: [batch, new positions,
/// width]`: `step(x, cache)` directly, or through `units` when the model's blocks are sharded
/// ([`ShardedUnits::run_without_graph`]). A rank that does not compute the block (held by
/// owners) counts the new positions in its `cache` without writing them ([`KvCache::skip`]).
/// What `Gpt::forward_cached` and `Llama::forward_cached` run for each block.
pub(crate) fn cached_step<B: Backend>(
    units: Option<&ShardedUnits<B>>,
    unit: usize,
    x: &Var<B>,
    cache: &mut KvCache<B>,
    step: impl FnOnce(&Var<B>, &mut KvCache<B>) -> Result<Var<B>>,
) -> Result<Var<B>> {
    let Some(units) = units else {
        return step(x, cache);
    };
    if !units.computes_here(unit) {
        cache.skip(x.dims()[1])?;
    }
    let pass = || Ok(step(x, cache)?.value());
    Ok(Var::constant(units.run_without_graph(
        unit,
        &x.value(),
        pass,
    )?))
}
