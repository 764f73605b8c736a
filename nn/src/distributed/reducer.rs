//! [`GradientReducer`]: averages the gradients of a set of parameters over every rank, bucket
//! by bucket.

use crate::distributed::buckets::{plan_buckets, Bucket};
use crate::distributed::communicator::{Communicator, Reduction};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result, Tensor};

/// What a [`GradientReducer`] has done since it was made (or since
/// [`GradientReducer::reset_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CommStats {
    /// Gradient synchronisations (one per training step).
    pub syncs: u64,
    /// All-reduce calls (one per bucket per synchronisation).
    pub collectives: u64,
    /// Bytes of gradients all-reduced by this rank.
    pub bytes: u64,
    /// Seconds inside [`Communicator::all_reduce`] and [`Communicator::synchronize`].
    pub reduce_seconds: f64,
    /// Seconds of whole synchronisations: flattening into buckets, the all-reduces and writing
    /// the averaged gradients back.
    pub sync_seconds: f64,
}

impl CommStats {
    /// Mean seconds per synchronisation (0 before the first).
    pub fn seconds_per_sync(&self) -> f64 {
        if self.syncs == 0 {
            0.0
        } else {
            self.sync_seconds / self.syncs as f64
        }
    }
}

/// Averages the gradients of fixed parameters over the ranks of a [`Communicator`].
///
/// The gradients are grouped into [`Bucket`]s (see [`plan_buckets`]); for each bucket they are
/// concatenated into one flat tensor on the device, all-reduced with [`Reduction::Mean`] in one
/// collective, and each parameter's gradient is replaced by its slice of the result. On a
/// single rank nothing is exchanged (the gradients already are the mean over one rank).
///
/// A parameter without a gradient on this rank (not used by this rank's forward pass) takes part
/// with zeros, so that every rank exchanges the same buffers; it then holds the average of the
/// ranks' gradients (zero when no rank produced one), and optimizers update it like any other.
pub struct GradientReducer<B: Backend> {
    params: Vec<(String, Var<B>)>,
    buckets: Vec<Bucket>,
    comm: Arc<dyn Communicator<B>>,
    stats: Mutex<CommStats>,
}

impl<B: Backend> GradientReducer<B> {
    /// A reducer of `params` (typically `model.parameters()`) over `comm`, with buckets of at
    /// most `bucket_bytes` (at least 1).
    pub fn new(
        params: Vec<(String, Var<B>)>,
        comm: Arc<dyn Communicator<B>>,
        bucket_bytes: usize,
    ) -> Result<Self> {
        if bucket_bytes == 0 {
            return Err(Error::InvalidArgument {
                op: "GradientReducer::new",
                msg: "bucket_bytes must be at least 1".into(),
            });
        }
        let sizes: Vec<_> = params.iter().map(|(_, v)| (v.dtype(), v.numel())).collect();
        let buckets = plan_buckets(&sizes, bucket_bytes);
        Ok(GradientReducer {
            params,
            buckets,
            comm,
            stats: Mutex::new(CommStats::default()),
        })
    }

    /// The buckets, in the order they are all-reduced.
    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// The parameters, in registration order (what [`Bucket::params`] indexes).
    pub fn parameters(&self) -> &[(String, Var<B>)] {
        &self.params
    }

    /// The communicator.
    pub fn communicator(&self) -> &Arc<dyn Communicator<B>> {
        &self.comm
    }

    /// Replaces every parameter's gradient by its mean over the ranks (a collective: every
    /// rank calls it after its backward pass, before its optimizer step).
    pub fn all_reduce_gradients(&self) -> Result<()> {
        if self.comm.world_size() == 1 {
            return Ok(());
        }
        let started = Instant::now();
        let mut reduce_seconds = 0.0;
        let mut bytes = 0u64;
        for bucket in &self.buckets {
            let mut flat = self.flatten(bucket)?;
            let reduce_started = Instant::now();
            self.comm.all_reduce(&mut flat, Reduction::Mean)?;
            reduce_seconds += reduce_started.elapsed().as_secs_f64();
            bytes += bucket.bytes() as u64;
            self.unflatten(bucket, &flat)?;
        }
        let wait_started = Instant::now();
        self.comm.synchronize()?;
        reduce_seconds += wait_started.elapsed().as_secs_f64();
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        stats.syncs += 1;
        stats.collectives += self.buckets.len() as u64;
        stats.bytes += bytes;
        stats.reduce_seconds += reduce_seconds;
        stats.sync_seconds += started.elapsed().as_secs_f64();
        Ok(())
    }

    /// The counters so far.
    pub fn stats(&self) -> CommStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the counters back to zero (e.g. after warm-up steps).
    pub fn reset_stats(&self) {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner()) = CommStats::default();
    }

    /// The bucket's gradients (zeros where there is none) as one rank-1 tensor.
    fn flatten(&self, bucket: &Bucket) -> Result<Tensor<B>> {
        let mut pieces = Vec::with_capacity(bucket.params.len());
        for &index in &bucket.params {
            let var = &self.params[index].1;
            let grad = match var.grad() {
                Some(g) => g,
                None => var.value().zeros_like()?,
            };
            pieces.push(grad.reshape([var.numel()])?);
        }
        if pieces.len() == 1 {
            return Ok(pieces.pop().expect("one piece"));
        }
        let refs: Vec<&Tensor<B>> = pieces.iter().collect();
        Tensor::cat(&refs, 0)
    }

    /// Gives each parameter of the bucket its slice of `flat` as its gradient.
    fn unflatten(&self, bucket: &Bucket, flat: &Tensor<B>) -> Result<()> {
        let mut offset = 0;
        for &index in &bucket.params {
            let var = &self.params[index].1;
            let n = var.numel();
            let grad = flat.narrow(0, offset, n)?.reshape(var.dims().to_vec())?;
            var.set_grad(Some(grad));
            offset += n;
        }
        Ok(())
    }
}
