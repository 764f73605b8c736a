//! [`DistributedDataParallel`]: a model trained on several ranks at once, each on its own
//! share of every batch, that stays identical on all of them.

use crate::distributed::buckets::DEFAULT_BUCKET_BYTES;
use crate::distributed::communicator::{Communicator, Reduction};
use crate::distributed::optimizer::DistributedOptimizer;
use crate::distributed::reducer::{CommStats, GradientReducer};
use crate::loss::cross_entropy;
use crate::module::placeholder::{is_placeholder, placeholder_element};
use crate::module::{Forward, Module, ModuleVisitor};
use crate::optim::Optimizer;
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{Backend, CommFailure, Error, Result, Tensor};

/// How [`DistributedDataParallel`] exchanges data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DdpConfig {
    /// Most bytes of gradients all-reduced in one collective (default
    /// [`DEFAULT_BUCKET_BYTES`], 25 MiB).
    pub bucket_bytes: usize,
    /// Whether the module's buffers (e.g. batch-norm running statistics) are broadcast from
    /// rank 0 before every forward pass in training mode, as PyTorch's DDP does by default
    /// (default true). Without it each rank keeps the statistics of its own shards.
    pub broadcast_buffers: bool,
}

impl Default for DdpConfig {
    fn default() -> Self {
        DdpConfig {
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            broadcast_buffers: true,
        }
    }
}

impl DdpConfig {
    /// The defaults: 25 MiB buckets, buffers broadcast.
    pub fn new() -> Self {
        Self::default()
    }

    /// Buckets of at most `bytes`.
    pub fn bucket_bytes(mut self, bytes: usize) -> Self {
        self.bucket_bytes = bytes;
        self
    }

    /// Whether buffers are broadcast from rank 0 before each training forward pass.
    pub fn broadcast_buffers(mut self, on: bool) -> Self {
        self.broadcast_buffers = on;
        self
    }
}

/// Data-parallel training of `module` over the ranks of a [`Communicator`], like PyTorch's
/// `DistributedDataParallel`:
///
/// 1. [`DistributedDataParallel::new`] broadcasts every parameter and buffer from rank 0, so
///    that all ranks start from rank 0's model whatever their own initialisation was;
/// 2. each rank runs forward and backward on its own shard of the batch (see
///    [`crate::distributed::DistributedSampler`]);
/// 3. the gradients are averaged over the ranks ([`GradientReducer`]: flattened into buckets
///    of about 25 MiB, one all-reduce per bucket);
/// 4. every rank takes the same optimizer step from the same gradients, so the parameters stay
///    identical (bit for bit: every rank receives the same all-reduced bits and computes the
///    same update).
///
/// **When the gradients are exchanged.** Tessera's autograd writes the leaves' gradients only
/// once the whole backward pass has succeeded (a failing backward changes no gradient), so
/// there is no per-parameter "gradient ready" hook to start a bucket's all-reduce during
/// backward. The buckets are therefore all-reduced **after** backward, in the order backward
/// would have produced them (last layers first): communication does not overlap computation.
/// Steps 3 and 4 are [`DistributedDataParallel::backward`] then `optimizer.step()`, or
/// [`DistributedDataParallel::train_step`], or an optimizer wrapped with
/// [`DistributedDataParallel::wrap_optimizer`] (which all-reduces in `step`), so existing
/// training loops become data-parallel by wrapping the model and the optimizer. Use one of the
/// three per step, not two: each call averages again.
///
/// With the mean loss of a per-rank batch of `b` samples on `W` ranks, the averaged gradient is
/// the gradient of the mean loss over the `W·b` samples: `W` ranks at batch `b` train like one
/// process at batch `W·b` (up to floating-point rounding).
///
/// The wrapper is itself a [`Module`] (names, mode, state dict and checkpoints are the inner
/// module's, without a `module.` prefix) and a [`Forward`] when the module is one.
///
/// ```
/// use std::sync::Arc;
/// use tessera_core::{DType, Generator, Tensor};
/// use tessera_nn::distributed::{DistributedDataParallel, LocalCommunicator};
/// use tessera_nn::layers::LinearConfig;
/// use tessera_nn::optim::{Sgd, SgdConfig};
/// use tessera_nn::Module;
/// # fn main() -> tessera_core::Result<()> {
/// let dev = tessera_cpu::Cpu::new();
/// let model = LinearConfig::new(4, 3).init(&dev, &mut Generator::new(0))?;
/// let ddp = DistributedDataParallel::new(model, Arc::new(LocalCommunicator::new()))?;
/// let mut optimizer = ddp.wrap_optimizer(Sgd::new(ddp.parameters(), SgdConfig::new(0.1))?);
/// let x = Tensor::randn([8, 4], DType::F32, 1, &dev)?;
/// let y = Tensor::from_vec(vec![0i64, 1, 2, 0, 1, 2, 0, 1], [8], &dev)?;
/// let loss = tessera_nn::training::train_step(&ddp, &mut optimizer, x, &y)?;
/// assert!(loss.to_scalar_f64()? > 0.0);
/// # Ok(()) }
/// ```
pub struct DistributedDataParallel<B: Backend, M> {
    module: M,
    reducer: Arc<GradientReducer<B>>,
    buffers: Vec<(String, Var<B>)>,
    config: DdpConfig,
}

impl<B: Backend, M: Module<B>> DistributedDataParallel<B, M> {
    /// Wraps `module` with the default [`DdpConfig`], broadcasting its parameters and buffers
    /// from rank 0 (a collective: every rank calls it).
    pub fn new(module: M, comm: Arc<dyn Communicator<B>>) -> Result<Self> {
        Self::with_config(module, comm, DdpConfig::default())
    }

    /// [`DistributedDataParallel::new`] with explicit options.
    pub fn with_config(
        module: M,
        comm: Arc<dyn Communicator<B>>,
        config: DdpConfig,
    ) -> Result<Self> {
        let reducer = Arc::new(GradientReducer::new(
            module.parameters(),
            comm,
            config.bucket_bytes,
        )?);
        let ddp = DistributedDataParallel {
            buffers: module.buffers(),
            module,
            reducer,
            config,
        };
        ddp.broadcast_state(0)?;
        Ok(ddp)
    }

    /// The wrapped module.
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The wrapped module, unwrapped.
    pub fn into_inner(self) -> M {
        self.module
    }

    /// The options.
    pub fn config(&self) -> DdpConfig {
        self.config
    }

    /// The communicator.
    pub fn communicator(&self) -> &Arc<dyn Communicator<B>> {
        self.reducer.communicator()
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.communicator().rank()
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.communicator().world_size()
    }

    /// Whether this is rank 0, the one that prints and writes checkpoints.
    pub fn is_rank0(&self) -> bool {
        self.rank() == 0
    }

    /// The gradient reducer (buckets, statistics).
    pub fn reducer(&self) -> &Arc<GradientReducer<B>> {
        &self.reducer
    }

    /// Communication counters and times so far.
    pub fn comm_stats(&self) -> CommStats {
        self.reducer.stats()
    }

    /// Averages every parameter's gradient over the ranks (after backward, before the
    /// optimizer step).
    pub fn sync_gradients(&self) -> Result<()> {
        self.reducer.all_reduce_gradients()
    }

    /// Back-propagates `loss` (this rank's mean loss), then averages the gradients over the
    /// ranks.
    pub fn backward(&self, loss: &Var<B>) -> Result<()> {
        loss.backward()?;
        self.sync_gradients()
    }

    /// `optimizer`, made to average the gradients over the ranks at the start of every `step`
    /// (Horovod's `DistributedOptimizer`): a training loop written for one process becomes
    /// data-parallel unchanged.
    pub fn wrap_optimizer<O: Optimizer<B>>(&self, optimizer: O) -> DistributedOptimizer<B, O> {
        DistributedOptimizer::new(optimizer, self.reducer.clone())
    }

    /// One data-parallel step with cross-entropy (see [`crate::training::train_step`]):
    /// forward on this rank's `features`, backward, gradient averaging, optimizer step.
    /// Returns this rank's loss without reading it back.
    pub fn train_step<O: Optimizer<B> + ?Sized>(
        &self,
        optimizer: &mut O,
        features: Tensor<B>,
        labels: &Tensor<B>,
    ) -> Result<Tensor<B>>
    where
        M: Forward<B>,
    {
        let logits = self.forward(&Var::constant(features))?;
        let loss = cross_entropy(&logits, labels)?;
        optimizer.zero_grad();
        self.backward(&loss)?;
        optimizer.step()?;
        Ok(loss.value())
    }

    /// Replaces every parameter and buffer by rank `root`'s (a collective). A tensor that is
    /// one element broadcast to its shape on every rank (a placeholder of a deferred build, or
    /// a released sharded unit's parameter) is sent as that element and stays a placeholder.
    pub fn broadcast_state(&self, root: usize) -> Result<()> {
        let comm = self.communicator();
        let vars: Vec<&Var<B>> = (self.reducer.parameters().iter().chain(&self.buffers))
            .map(|(_, v)| v)
            .collect();
        // 1 where this tensor is a placeholder on every rank.
        let mut compact: Vec<f64> = vars
            .iter()
            .map(|v| f64::from(u8::from(is_placeholder(&v.value()))))
            .collect();
        if self.world_size() > 1 {
            comm.all_reduce_host(&mut compact, Reduction::Min)?;
        }
        for (var, compact) in vars.into_iter().zip(compact) {
            let value = var.value();
            if compact > 0.0 {
                let mut one = placeholder_element(&value)?;
                comm.broadcast(&mut one, root)?;
                var.set_value(one.broadcast_to(value.dims().to_vec())?)?;
            } else {
                let mut value = value;
                comm.broadcast(&mut value, root)?;
                var.set_value(value)?;
            }
        }
        comm.synchronize()
    }

    /// Checks that every rank holds the same parameters and buffers, bit for bit (a
    /// collective; it reads every tensor back to the host, so call it to debug or test, not
    /// every step). The difference is an [`Error::Communication`] of kind
    /// [`CommFailure::Mismatch`] naming the tensors that differ.
    pub fn check_in_sync(&self) -> Result<()> {
        let comm = self.communicator();
        let tensors: Vec<&(String, Var<B>)> = self
            .reducer
            .parameters()
            .iter()
            .chain(&self.buffers)
            .collect();
        let mut hashes = Vec::with_capacity(tensors.len());
        for (_, var) in &tensors {
            hashes.push(fingerprint(&var.value())?);
        }
        let mut highest = hashes.clone();
        let mut lowest = hashes;
        comm.all_reduce_host(&mut highest, Reduction::Max)?;
        comm.all_reduce_host(&mut lowest, Reduction::Min)?;
        let differing: Vec<&str> = tensors
            .iter()
            .zip(highest.iter().zip(&lowest))
            .filter(|(_, (h, l))| h != l)
            .map(|((name, _), _)| name.as_str())
            .collect();
        if differing.is_empty() {
            return Ok(());
        }
        Err(Error::Communication {
            library: comm.library(),
            op: "check_in_sync",
            rank: comm.rank(),
            world_size: comm.world_size(),
            kind: CommFailure::Mismatch,
            msg: format!(
                "these tensors differ between ranks: {}",
                differing.join(", ")
            ),
        })
    }
}

/// A 52-bit FNV-1a hash of the tensor's dtype, shape and element bits, as an f64 (exact).
fn fingerprint<B: Backend>(tensor: &Tensor<B>) -> Result<f64> {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(tensor.dtype().to_string().as_bytes());
    for &d in tensor.dims() {
        eat(&(d as u64).to_le_bytes());
    }
    match tensor.to_host()? {
        tessera_core::HostData::F32(v) => v.iter().for_each(|x| eat(&x.to_bits().to_le_bytes())),
        tessera_core::HostData::F64(v) => v.iter().for_each(|x| eat(&x.to_bits().to_le_bytes())),
        tessera_core::HostData::I64(v) => v.iter().for_each(|x| eat(&x.to_le_bytes())),
        tessera_core::HostData::F16(v) => v.iter().for_each(|x| eat(&x.to_bits().to_le_bytes())),
        tessera_core::HostData::BF16(v) => v.iter().for_each(|x| eat(&x.to_bits().to_le_bytes())),
        tessera_core::HostData::Bool(v) => eat(&v),
        other => eat(&format!("{other:?}").into_bytes()),
    }
    Ok((hash & ((1 << 52) - 1)) as f64)
}

impl<B: Backend, M: Module<B>> Module<B> for DistributedDataParallel<B, M> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        self.module.visit(prefix, visitor)
    }

    fn set_training(&self, training: bool) {
        self.module.set_training(training)
    }

    fn training_mode(&self) -> Option<bool> {
        self.module.training_mode()
    }
}

impl<B: Backend, M: Forward<B>> Forward<B> for DistributedDataParallel<B, M> {
    /// The module's forward pass; in training mode on several ranks, with
    /// [`DdpConfig::broadcast_buffers`], rank 0's buffers are broadcast first (a collective).
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let sync_buffers = self.config.broadcast_buffers
            && !self.buffers.is_empty()
            && self.world_size() > 1
            && self.is_training();
        if sync_buffers {
            let comm = self.communicator();
            for (_, var) in &self.buffers {
                let mut value = var.value();
                comm.broadcast(&mut value, 0)?;
                var.set_value(value)?;
            }
        }
        self.module.forward(x)
    }
}
