//! [`BackwardReducer`]: reduce-scatters each bucket of gradients during the backward pass, as
//! soon as every parameter in it has its complete gradient (through autograd's gradient-ready
//! hooks), and drops the whole gradients: at sharding levels 2 and 3 a rank then never holds
//! every whole gradient at once (ZeRO-2's bucketed reduction).
//!
//! With overlap switched on ([`BackwardReducer::set_overlap`]), each reduction is *started*
//! ([`Communicator::start_reduce_scatter`]): on a communicator that runs it in the background
//! (MPI's) the backward pass computes on while the bucket's exchange runs, until the next
//! bucket's reduction or the step ([`BackwardReducer::finish`]) waits for it. Either way the
//! results are added to the shares' gradients in the order the reductions started, so they
//! are the same bits.
//!
//! Buckets are reduced strictly in bucket order (bucket 0 holds the last parameters, whose
//! gradients are complete first): a bucket complete before an earlier one waits for it. So every
//! rank issues its reduce-scatters in the same order whatever the timing, and a bucket left
//! incomplete by a pass (a parameter the pass did not reach) is reduced, in that same order,
//! by [`super::ShardedOptimizer::sync_gradients`].

use super::flat::FlatBucket;
use crate::distributed::communicator::{Communicator, Reduction};
use crate::distributed::PendingCollective;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tessera_autograd::{GradReadyHook, Var};
use tessera_core::{Backend, Result};

/// Reduces buckets of an optimizer's gradients during backward (see the module docs).
pub(crate) struct BackwardReducer<B: Backend> {
    comm: Arc<dyn Communicator<B>>,
    /// The optimizer's parameters (the buckets index them).
    params: Vec<(String, Var<B>)>,
    /// The buckets reduced during backward, in the order they are reduced.
    buckets: Vec<FlatBucket>,
    /// Their positions among the optimizer's buckets.
    positions: Vec<usize>,
    /// Their shares (the leaves whose gradient receives the reduced share).
    shards: Vec<Var<B>>,
    /// Each hooked parameter's bucket and slot in it, by `Var` id.
    slots: HashMap<u64, (usize, usize)>,
    /// The hook installed on every parameter of the buckets.
    hook: GradReadyHook<B>,
    pass: Mutex<PassState<B>>,
    /// Whether reductions are started rather than run at once.
    overlap: AtomicBool,
}

/// What the backward passes since the last step have done.
struct PassState<B: Backend> {
    /// Per bucket and slot: the parameter's gradient of the current pass is complete.
    ready: Vec<Vec<bool>>,
    /// The next bucket to reduce (all before it are reduced in this pass).
    next: usize,
    /// Per bucket: reduced since the last step (its reduction started, or done).
    reduced: Vec<bool>,
    /// Per bucket: a reduction's result added to its share's gradient since the last step.
    settled: Vec<bool>,
    /// The reduction started and not yet settled, if any: its bucket and handle. One at a
    /// time: a communicator runs its started collectives one after another anyway (MPI's
    /// lock), and settling each before the next is started adds it to its share at once, so
    /// passes before a step hold one share-sized gradient per bucket, not one per pass.
    in_flight: Option<(usize, PendingCollective<B>)>,
    /// Per bucket: bytes of whole gradients its parameters hold, not yet reduced.
    held: Vec<usize>,
    /// The most bytes of gradients held at once, over every pass so far: whole gradients not
    /// yet reduced, and the reduced shares' gradients.
    peak_held: Option<usize>,
}

impl<B: Backend> BackwardReducer<B> {
    /// A reducer of `buckets` (positions `positions` among the optimizer's, shares `shards`),
    /// with its hook installed on their parameters.
    pub fn attach(
        comm: Arc<dyn Communicator<B>>,
        params: Vec<(String, Var<B>)>,
        buckets: Vec<(usize, FlatBucket, Var<B>)>,
    ) -> Result<Arc<Self>> {
        let mut slots = HashMap::new();
        for (b, (_, bucket, _)) in buckets.iter().enumerate() {
            for (slot, &index) in bucket.params.iter().enumerate() {
                slots.insert(params[index].1.id(), (b, slot));
            }
        }
        let pass = PassState {
            ready: buckets
                .iter()
                .map(|(_, b, _)| vec![false; b.params.len()])
                .collect(),
            next: 0,
            reduced: vec![false; buckets.len()],
            settled: vec![false; buckets.len()],
            in_flight: None,
            held: vec![0; buckets.len()],
            peak_held: None,
        };
        let reducer = Arc::new_cyclic(|me: &Weak<Self>| {
            let me = me.clone();
            let hook: GradReadyHook<B> = Arc::new(move |leaf: &Var<B>| match me.upgrade() {
                Some(reducer) => reducer.gradient_ready(leaf),
                None => Ok(()),
            });
            let (mut positions, mut flat, mut shards) = (Vec::new(), Vec::new(), Vec::new());
            for (position, bucket, shard) in buckets {
                positions.push(position);
                flat.push(bucket);
                shards.push(shard);
            }
            BackwardReducer {
                comm,
                params,
                buckets: flat,
                positions,
                shards,
                slots,
                hook,
                pass: Mutex::new(pass),
                overlap: AtomicBool::new(false),
            }
        });
        for bucket in &reducer.buckets {
            for &index in &bucket.params {
                let var = &reducer.params[index].1;
                var.set_grad_ready_hook(Some(reducer.hook.clone()))?;
            }
        }
        Ok(reducer)
    }

    /// Starts each bucket's reduction and lets the backward pass go on (`true`), or reduces it
    /// at once (`false`, the default). Every rank must choose the same.
    pub fn set_overlap(&self, on: bool) {
        self.overlap.store(on, Ordering::Relaxed);
    }

    /// Removes its hook from the parameters (those whose hook is still this one).
    pub fn detach(&self) {
        for bucket in &self.buckets {
            for &index in &bucket.params {
                let var = &self.params[index].1;
                if var
                    .grad_ready_hook()
                    .is_some_and(|h| Arc::ptr_eq(&h, &self.hook))
                {
                    let _ = var.set_grad_ready_hook(None);
                }
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, PassState<B>> {
        self.pass.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hook: marks `leaf` ready and reduces every bucket that can go next.
    fn gradient_ready(&self, leaf: &Var<B>) -> Result<()> {
        let Some(&(b, slot)) = self.slots.get(&leaf.id()) else {
            return Ok(());
        };
        let mut pass = self.lock();
        if pass.next == self.buckets.len() {
            // Every bucket went in an earlier pass: another pass before the step.
            pass.next = 0;
        }
        if !pass.ready[b][slot] {
            pass.ready[b][slot] = true;
            if leaf.grad().is_some() {
                pass.held[b] += leaf.numel() * leaf.dtype().size_in_bytes();
            }
            let whole: usize = pass.held.iter().sum();
            let reduced: usize = (0..self.shards.len())
                .filter(|&i| pass.reduced[i])
                .map(|i| self.shards[i].numel() * self.shards[i].dtype().size_in_bytes())
                .sum();
            let held = whole + reduced;
            pass.peak_held = Some(pass.peak_held.map_or(held, |p| p.max(held)));
        }
        while pass.next < self.buckets.len() && pass.ready[pass.next].iter().all(|&r| r) {
            let next = pass.next;
            self.reduce(&mut pass, next)?;
            pass.next += 1;
        }
        Ok(())
    }

    /// Reduce-scatters bucket `b` (a collective; started, with overlap) and drops the
    /// parameters' gradients; [`BackwardReducer::settle`] adds the result to the share's
    /// gradient.
    fn reduce(&self, pass: &mut PassState<B>, b: usize) -> Result<()> {
        self.settle(pass)?;
        let bucket = &self.buckets[b];
        let flat = bucket.flatten_grads(&self.params, self.comm.world_size())?;
        let overlap = self.overlap.load(Ordering::Relaxed);
        let started = if overlap {
            self.comm
                .clone()
                .start_reduce_scatter(&flat, Reduction::Mean)?
        } else {
            PendingCollective::ready(self.comm.reduce_scatter(&flat, Reduction::Mean)?)
        };
        drop(flat);
        for &index in &bucket.params {
            self.params[index].1.set_grad(None);
        }
        pass.in_flight = Some((b, started));
        pass.reduced[b] = true;
        pass.ready[b].iter_mut().for_each(|r| *r = false);
        pass.held[b] = 0;
        if !overlap {
            self.settle(pass)?;
        }
        Ok(())
    }

    /// Waits for the reduction in flight, if any, adding its result to its share's gradient
    /// (to what an earlier pass left there since the step).
    fn settle(&self, pass: &mut PassState<B>) -> Result<()> {
        if let Some((b, started)) = pass.in_flight.take() {
            let mine = started.wait()?;
            let shard = &self.shards[b];
            let total = match (pass.settled[b], shard.grad()) {
                (true, Some(earlier)) => earlier.add(&mine)?,
                _ => mine,
            };
            shard.set_grad(Some(total));
            pass.settled[b] = true;
        }
        Ok(())
    }

    /// Ends the step's reduction: reduces, in bucket order, every bucket that a pass left
    /// incomplete or that received gradients since it was reduced (a collective), then forgets
    /// the passes. Returns the optimizer's bucket positions it covers (all of them reduced).
    pub fn finish(&self) -> Result<Vec<usize>> {
        let mut pass = self.lock();
        for b in 0..self.buckets.len() {
            let bucket = &self.buckets[b];
            let fresh = bucket
                .params
                .iter()
                .any(|&i| self.params[i].1.grad().is_some());
            if !pass.reduced[b] || fresh {
                self.reduce(&mut pass, b)?;
            }
        }
        self.settle(&mut pass)?;
        self.reset_locked(&mut pass);
        Ok(self.positions.clone())
    }

    /// Forgets the passes since the last step (the gradients were zeroed).
    pub fn reset(&self) {
        let mut pass = self.lock();
        self.reset_locked(&mut pass);
    }

    fn reset_locked(&self, pass: &mut PassState<B>) {
        // A started reduction is a collective every rank takes part in: it completes (dropping
        // its handle waits for it), its result unused.
        pass.in_flight = None;
        pass.next = 0;
        pass.reduced.iter_mut().for_each(|r| *r = false);
        pass.settled.iter_mut().for_each(|r| *r = false);
        pass.held.iter_mut().for_each(|h| *h = 0);
        for ready in &mut pass.ready {
            ready.iter_mut().for_each(|r| *r = false);
        }
    }

    /// The most bytes of gradients held at once during the backward passes so far: whole
    /// gradients not yet reduced and the reduced shares' gradients (`None` before the first
    /// pass).
    pub fn peak_held_bytes(&self) -> Option<usize> {
        self.lock().peak_held
    }
}
