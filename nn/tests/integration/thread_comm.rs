//! An in-test communicator whose ranks are threads of one process: host copies exchanged in
//! rank order, so every rank computes the same bits, as the MPI communicator does.

use std::sync::{Arc, Barrier, Mutex};
use tessera_core::{Backend, Result, Tensor};
use tessera_nn::distributed::{
    check_reducible, check_root, Communicator, PendingCollective, Reduction,
};

/// What the threads of one group share: a barrier and one slot per rank.
struct Group {
    barrier: Barrier,
    slots: Mutex<Vec<Vec<f64>>>,
}

/// Rank `rank` of a group of threads. Tensors travel as f64 host copies; reductions visit the
/// ranks in order, so every rank computes the same bits.
pub(crate) struct ThreadComm {
    pub(crate) rank: usize,
    pub(crate) world: usize,
    group: Arc<Group>,
}

impl ThreadComm {
    pub(crate) fn group(world: usize) -> Vec<ThreadComm> {
        let group = Arc::new(Group {
            barrier: Barrier::new(world),
            slots: Mutex::new(vec![Vec::new(); world]),
        });
        (0..world)
            .map(|rank| ThreadComm {
                rank,
                world,
                group: group.clone(),
            })
            .collect()
    }

    /// Every rank's `mine`, in rank order.
    fn exchange(&self, mine: Vec<f64>) -> Vec<Vec<f64>> {
        self.group.slots.lock().unwrap()[self.rank] = mine;
        self.group.barrier.wait();
        let all = self.group.slots.lock().unwrap().clone();
        self.group.barrier.wait();
        all
    }

    fn reduce(&self, mine: Vec<f64>, op: Reduction) -> Vec<f64> {
        let all = self.exchange(mine);
        let mut out = all[0].clone();
        for other in &all[1..] {
            for (o, &v) in out.iter_mut().zip(other) {
                *o = match op {
                    Reduction::Sum | Reduction::Mean => *o + v,
                    Reduction::Max => o.max(v),
                    Reduction::Min => o.min(v),
                };
            }
        }
        if op == Reduction::Mean {
            out.iter_mut().for_each(|o| *o /= self.world as f64);
        }
        out
    }
}

fn rebuild<B: Backend>(like: &Tensor<B>, values: Vec<f64>) -> Result<Tensor<B>> {
    Tensor::from_f64_values(&values, like.shape().clone(), like.dtype(), like.backend())
}

impl<B: Backend> Communicator<B> for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.world
    }
    fn library(&self) -> &'static str {
        "threads"
    }
    fn all_reduce(&self, tensor: &mut Tensor<B>, op: Reduction) -> Result<()> {
        check_reducible(tensor.dtype(), op)?;
        let reduced = self.reduce(tensor.to_vec_f64()?, op);
        *tensor = rebuild(tensor, reduced)?;
        Ok(())
    }
    fn broadcast(&self, tensor: &mut Tensor<B>, root: usize) -> Result<()> {
        check_root("broadcast", root, self.world)?;
        let all = self.exchange(tensor.to_vec_f64()?);
        *tensor = rebuild(tensor, all[root].clone())?;
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        self.exchange(Vec::new());
        Ok(())
    }
    /// Runs when waited for (not at once, as the provided method does), so that the tests of
    /// the callers that start reductions (level 2's reduction during backward) see a result
    /// arrive late, as it does from MPI's thread.
    fn start_reduce_scatter(
        self: Arc<Self>,
        tensor: &Tensor<B>,
        op: Reduction,
    ) -> Result<PendingCollective<B>> {
        let tensor = tensor.clone();
        Ok(PendingCollective::new(move || {
            self.reduce_scatter(&tensor, op)
        }))
    }
    fn all_reduce_host(&self, values: &mut [f64], op: Reduction) -> Result<()> {
        let reduced = self.reduce(values.to_vec(), op);
        values.copy_from_slice(&reduced);
        Ok(())
    }
}

/// Runs `body(comm)` on `world` threads, returning each rank's result in rank order.
pub(crate) fn on_ranks<T: Send>(world: usize, body: impl Fn(ThreadComm) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ThreadComm::group(world)
            .into_iter()
            .map(|comm| s.spawn(|| body(comm)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
