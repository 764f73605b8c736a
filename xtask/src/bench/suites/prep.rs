//! The `prep` suite: decode, normalise and batch one Fashion-MNIST training epoch onto the
//! device, as the `train` command's loader does.

use tessera_core::Backend;
use tessera_nn::data::{DataLoader, LoaderConfig, MnistDataset, MnistLike, Normalization, Split};

use crate::bench::record::Record;
use crate::bench::suites::data_source::DataArgs;
use crate::bench::timing::Protocol;
use crate::TaskResult;

/// The suite's name.
pub const NAME: &str = "prep";

/// Samples per batch: the CNN's, whose `[n, 1, 28, 28]` batches need no reshaping later.
pub const BATCH: usize = 64;

/// One epoch of data preparation: reads and decodes the gzip'd IDX training files, builds the
/// normalised data set, and walks one shuffled epoch of batches (prepared by the loader's
/// background thread, as in training), turning each into device tensors. Returns the samples.
pub fn one_epoch<B: Backend>(args: &DataArgs, dev: &B) -> tessera_nn::Result<usize> {
    let raw = MnistLike::load(&args.data, Split::Train)?;
    let dataset = MnistDataset::new(raw, Normalization::FASHION_MNIST);
    let loader = DataLoader::new(dataset, LoaderConfig::new(BATCH).shuffled(0).prefetch(2))?;
    let mut samples = 0;
    for batch in loader.epoch(0)? {
        let batch = batch?;
        samples += batch.len();
        let tensors = batch.into_tensors(dev)?;
        drop(tensors);
    }
    dev.synchronize()?;
    Ok(samples)
}

/// Times [`one_epoch`] and emits one `phase = "prep"` record with samples/s.
pub fn measure<B: Backend>(
    dev: &B,
    args: &DataArgs,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> TaskResult<()> {
    if let Some(reason) = args.missing_reason() {
        return Err(reason.into());
    }
    let mut samples = 0;
    let timing = protocol.measure(args.reps.map(|r| r as usize), || {
        samples = one_epoch(args, dev)?;
        Ok::<_, tessera_nn::Error>(())
    })?;
    emit(
        Record::new(NAME, "tessera", dev.name(), samples, &timing)
            .with_samples()
            .with_phase("prep"),
    );
    Ok(())
}
