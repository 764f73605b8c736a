//! [`DataLoader`]: mini-batches of a [`Dataset`] in a seeded per-epoch order, prepared ahead of
//! time by a background thread.

use crate::data::batch::Batch;
use crate::data::dataset::Dataset;
use crate::data::shuffle::epoch_permutation;
use crate::{Error, Result};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How a [`DataLoader`] cuts and orders its batches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoaderConfig {
    /// Items per batch (at least 1).
    pub batch_size: usize,
    /// Whether each epoch visits the items in a shuffled order (otherwise `0, 1, 2, ...`).
    pub shuffle: bool,
    /// Seed of the shuffle; the order of epoch `e` depends only on `(seed, e)`.
    pub seed: u64,
    /// Whether to drop the last batch of an epoch when it has fewer than `batch_size` items.
    pub drop_last: bool,
    /// How many batches a background thread may prepare ahead of the consumer; 0 prepares each
    /// batch on the consumer's thread when it is asked for.
    pub prefetch: usize,
}

impl LoaderConfig {
    /// Batches of `batch_size`, shuffled with seed 0, last partial batch kept, 2 batches of
    /// prefetch.
    pub fn new(batch_size: usize) -> Self {
        LoaderConfig {
            batch_size,
            shuffle: true,
            seed: 0,
            drop_last: false,
            prefetch: 2,
        }
    }

    /// Shuffles every epoch with `seed`.
    pub fn shuffled(mut self, seed: u64) -> Self {
        self.shuffle = true;
        self.seed = seed;
        self
    }

    /// Visits the items in index order every epoch.
    pub fn sequential(mut self) -> Self {
        self.shuffle = false;
        self
    }

    /// Sets whether a last, smaller batch is dropped.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Sets how many batches are prepared ahead (0: no background thread).
    pub fn prefetch(mut self, batches: usize) -> Self {
        self.prefetch = batches;
        self
    }
}

/// Cuts a [`Dataset`] into [`Batch`]es, one epoch at a time.
///
/// ```no_run
/// # fn demo() -> tessera_nn::Result<()> {
/// use tessera_nn::data::{DataLoader, LoaderConfig, MnistDataset, MnistLike, Normalization, Split};
/// let train = MnistLike::load(tessera_nn::data::FASHION_MNIST_DIR, Split::Train)?;
/// let dataset = MnistDataset::new(train, Normalization::FASHION_MNIST);
/// let loader = DataLoader::new(dataset, LoaderConfig::new(128).shuffled(42))?;
/// for epoch in 0..3 {
///     for batch in loader.epoch(epoch)? {
///         let batch = batch?;
///         // let (x, y) = batch.to_tensors(&backend)?; ...
///         # let _ = batch;
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DataLoader<D: Dataset + 'static> {
    dataset: Arc<D>,
    config: LoaderConfig,
}

impl<D: Dataset + 'static> Clone for DataLoader<D> {
    fn clone(&self) -> Self {
        DataLoader {
            dataset: self.dataset.clone(),
            config: self.config.clone(),
        }
    }
}

impl<D: Dataset + 'static> DataLoader<D> {
    /// A loader over `dataset`; fails when `config.batch_size` is 0.
    pub fn new(dataset: impl Into<Arc<D>>, config: LoaderConfig) -> Result<Self> {
        if config.batch_size == 0 {
            return Err(Error::InvalidArgument {
                op: "DataLoader::new",
                msg: "batch_size must be at least 1".to_string(),
            });
        }
        Ok(DataLoader {
            dataset: dataset.into(),
            config,
        })
    }

    /// The data set batches are read from.
    pub fn dataset(&self) -> &Arc<D> {
        &self.dataset
    }

    /// The batching configuration.
    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    /// Number of batches in one epoch.
    pub fn batches_per_epoch(&self) -> usize {
        let n = self.dataset.len();
        let b = self.config.batch_size;
        if self.config.drop_last {
            n / b
        } else {
            n.div_ceil(b)
        }
    }

    /// The order in which epoch `epoch` visits the items (before cutting into batches).
    pub fn epoch_order(&self, epoch: u64) -> Vec<usize> {
        let n = self.dataset.len();
        if self.config.shuffle {
            epoch_permutation(n, self.config.seed, epoch)
        } else {
            (0..n).collect()
        }
    }

    /// The batches of epoch `epoch`. With `prefetch > 0` a background thread prepares them ahead;
    /// dropping the iterator early stops and joins that thread. Fails only when the thread cannot
    /// be started.
    pub fn epoch(&self, epoch: u64) -> Result<EpochBatches<D>> {
        let order = self.epoch_order(epoch);
        let total = self.batches_per_epoch();
        let batch_size = self.config.batch_size;
        let source = if self.config.prefetch == 0 {
            Source::Inline {
                dataset: self.dataset.clone(),
                order,
            }
        } else {
            let (sender, receiver) = sync_channel::<Result<Batch>>(self.config.prefetch);
            let dataset = self.dataset.clone();
            let worker = std::thread::Builder::new()
                .name("nn-data-prefetch".to_string())
                .spawn(move || {
                    for indices in order.chunks(batch_size).take(total) {
                        let batch = Batch::from_dataset(&*dataset, indices);
                        let failed = batch.is_err();
                        // A send error means the consumer dropped the iterator: stop quietly.
                        if sender.send(batch).is_err() || failed {
                            return;
                        }
                    }
                })
                .map_err(|e| Error::Worker {
                    msg: format!("cannot start the prefetch thread: {e}"),
                })?;
            Source::Prefetch {
                receiver: Some(receiver),
                worker: Some(worker),
            }
        };
        Ok(EpochBatches {
            source,
            batch_size,
            total,
            produced: 0,
            finished: total == 0,
        })
    }
}

/// Where an epoch's batches come from.
#[derive(Debug)]
enum Source<D: Dataset + 'static> {
    /// Built on the consumer's thread when asked for.
    Inline { dataset: Arc<D>, order: Vec<usize> },
    /// Built ahead by a worker thread and received through a bounded channel.
    Prefetch {
        receiver: Option<Receiver<Result<Batch>>>,
        worker: Option<JoinHandle<()>>,
    },
}

/// The batches of one epoch, in order; yields `Err` at most once (then ends).
#[derive(Debug)]
pub struct EpochBatches<D: Dataset + 'static> {
    source: Source<D>,
    batch_size: usize,
    total: usize,
    produced: usize,
    finished: bool,
}

impl<D: Dataset + 'static> EpochBatches<D> {
    /// Total number of batches in this epoch (yielded or not).
    pub fn total_batches(&self) -> usize {
        self.total
    }
}

/// The next batch from the prefetch worker, or the reason it stopped early.
fn receive(
    receiver: &Option<Receiver<Result<Batch>>>,
    worker: &mut Option<JoinHandle<()>>,
) -> Result<Batch> {
    if let Some(batch) = receiver.as_ref().and_then(|r| r.recv().ok()) {
        return batch;
    }
    // The worker hung up before sending every batch: it panicked.
    let msg = match worker.take().map(JoinHandle::join) {
        Some(Err(panic)) => {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown payload".to_string());
            format!("the prefetch thread panicked: {text}")
        }
        _ => "the prefetch thread stopped before the end of the epoch".to_string(),
    };
    Err(Error::Worker { msg })
}

impl<D: Dataset + 'static> Iterator for EpochBatches<D> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let batch = match &mut self.source {
            Source::Inline { dataset, order } => {
                let start = self.produced * self.batch_size;
                let end = (start + self.batch_size).min(order.len());
                Batch::from_dataset(&**dataset, &order[start..end])
            }
            Source::Prefetch { receiver, worker } => receive(receiver, worker),
        };
        self.produced += 1;
        if batch.is_err() || self.produced == self.total {
            self.finished = true;
        }
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.finished {
            0
        } else {
            self.total - self.produced
        };
        (0, Some(left))
    }
}

impl<D: Dataset + 'static> std::iter::FusedIterator for EpochBatches<D> {}

impl<D: Dataset + 'static> Drop for EpochBatches<D> {
    fn drop(&mut self) {
        if let Source::Prefetch { receiver, worker } = &mut self.source {
            // Closing the channel first wakes a worker blocked on a full channel; its next send
            // fails and it returns, so the join below cannot hang.
            drop(receiver.take());
            if let Some(handle) = worker.take() {
                // A panic was already reported through `next` or nobody is listening any more.
                let _ = handle.join();
            }
        }
    }
}
