//! DataLoader: epoch coverage, seeded order, drop_last, batch contents, prefetch equivalence,
//! worker shutdown and error propagation; SplitMix64 against published values; normalisation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tessera_nn::data::shuffle::{epoch_permutation, SplitMix64};
use tessera_nn::data::{
    Batch, DataLoader, Dataset, LoaderConfig, MnistDataset, MnistLike, Normalization,
};
use tessera_nn::{Error, Result};

/// Item `i` has features `[i, -i, 0.5]` and label `i % 7`; counts `fill_batch` calls, fails on
/// `fail_at` and panics on `panic_at`.
struct Probe {
    n: usize,
    dims: Vec<usize>,
    calls: AtomicUsize,
    fail_at: Option<usize>,
    panic_at: Option<usize>,
}

impl Probe {
    fn new(n: usize) -> Self {
        Probe {
            n,
            dims: vec![3],
            calls: AtomicUsize::new(0),
            fail_at: None,
            panic_at: None,
        }
    }
}

impl Dataset for Probe {
    fn len(&self) -> usize {
        self.n
    }
    fn item_dims(&self) -> &[usize] {
        &self.dims
    }
    fn fill_batch(&self, indices: &[usize], f: &mut Vec<f32>, l: &mut Vec<i64>) -> Result<()> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        for &i in indices {
            if Some(i) == self.fail_at {
                return Err(Error::InvalidArgument {
                    op: "Probe",
                    msg: format!("item {i} is broken"),
                });
            }
            if Some(i) == self.panic_at {
                panic!("probe panics on item {i}");
            }
            f.extend([i as f32, -(i as f32), 0.5]);
            l.push((i % 7) as i64);
        }
        Ok(())
    }
}

fn collect(loader: &DataLoader<Probe>, epoch: u64) -> Vec<Batch> {
    loader
        .epoch(epoch)
        .unwrap()
        .collect::<Result<Vec<_>>>()
        .unwrap()
}

#[test]
fn splitmix64_matches_the_reference_sequence() {
    // Published first outputs of Vigna's splitmix64.c for seed 1234567.
    let mut rng = SplitMix64::new(1234567);
    let got: Vec<u64> = (0..5).map(|_| rng.next_u64()).collect();
    assert_eq!(
        got,
        vec![
            6457827717110365317,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821
        ]
    );
}

#[test]
fn bounded_draws_and_shuffles_are_uniform() {
    let mut rng = SplitMix64::new(7);
    let mut counts = [0usize; 6];
    for _ in 0..60_000 {
        counts[rng.below(6) as usize] += 1;
    }
    // Expected 10_000 each; 5 sigma is about 460.
    assert!(
        counts.iter().all(|&c| (9_500..10_500).contains(&c)),
        "{counts:?}"
    );
    assert_eq!(rng.below(0), 0);

    // All 6 permutations of 3 items, over 6000 epochs: ~1000 each (5 sigma ~ 150).
    let mut perms = std::collections::HashMap::new();
    for epoch in 0..6000 {
        *perms
            .entry(epoch_permutation(3, 99, epoch))
            .or_insert(0usize) += 1;
    }
    assert_eq!(perms.len(), 6);
    assert!(
        perms.values().all(|&c| (850..1150).contains(&c)),
        "{perms:?}"
    );
}

#[test]
fn every_index_appears_once_per_epoch() {
    for prefetch in [0, 1, 3] {
        let loader = DataLoader::new(
            Probe::new(103),
            LoaderConfig::new(10).shuffled(5).prefetch(prefetch),
        )
        .unwrap();
        assert_eq!(loader.batches_per_epoch(), 11);
        for epoch in 0..3 {
            let batches = collect(&loader, epoch);
            assert_eq!(batches.len(), 11);
            let sizes: Vec<usize> = batches.iter().map(Batch::len).collect();
            assert_eq!(sizes, [vec![10; 10], vec![3]].concat());
            let mut seen: Vec<usize> = batches.iter().flat_map(|b| b.indices.clone()).collect();
            assert_eq!(seen, loader.epoch_order(epoch));
            seen.sort_unstable();
            assert_eq!(seen, (0..103).collect::<Vec<_>>(), "prefetch {prefetch}");
        }
    }
}

#[test]
fn same_seed_same_order_other_epoch_or_seed_other_order() {
    let a = DataLoader::new(Probe::new(500), LoaderConfig::new(32).shuffled(42)).unwrap();
    let b = DataLoader::new(Probe::new(500), LoaderConfig::new(32).shuffled(42)).unwrap();
    let c = DataLoader::new(Probe::new(500), LoaderConfig::new(32).shuffled(43)).unwrap();
    assert_eq!(a.epoch_order(0), b.epoch_order(0));
    assert_eq!(a.epoch_order(7), b.epoch_order(7));
    assert_ne!(a.epoch_order(0), a.epoch_order(1));
    assert_ne!(a.epoch_order(0), c.epoch_order(0));
    assert_ne!(a.epoch_order(0), (0..500).collect::<Vec<_>>());
    let indices = |l: &DataLoader<Probe>, e| -> Vec<usize> {
        collect(l, e)
            .iter()
            .flat_map(|x| x.indices.clone())
            .collect()
    };
    assert_eq!(indices(&a, 3), indices(&b, 3));
    assert_ne!(indices(&a, 3), indices(&a, 4));
    let sequential = DataLoader::new(Probe::new(50), LoaderConfig::new(8).sequential()).unwrap();
    assert_eq!(indices(&sequential, 9), (0..50).collect::<Vec<_>>());
}

#[test]
fn drop_last_removes_only_the_short_final_batch() {
    let keep = DataLoader::new(Probe::new(10), LoaderConfig::new(4).sequential()).unwrap();
    let drop = DataLoader::new(
        Probe::new(10),
        LoaderConfig::new(4).sequential().drop_last(true),
    )
    .unwrap();
    let sizes = |l: &DataLoader<Probe>| collect(l, 0).iter().map(Batch::len).collect::<Vec<_>>();
    assert_eq!(sizes(&keep), vec![4, 4, 2]);
    assert_eq!(sizes(&drop), vec![4, 4]);
    assert_eq!(drop.batches_per_epoch(), 2);
    // An exact multiple loses nothing; fewer items than a batch leaves no batch at all.
    let exact = DataLoader::new(Probe::new(8), LoaderConfig::new(4).drop_last(true)).unwrap();
    assert_eq!(sizes(&exact), vec![4, 4]);
    let tiny = DataLoader::new(Probe::new(3), LoaderConfig::new(4).drop_last(true)).unwrap();
    assert_eq!(tiny.epoch(0).unwrap().count(), 0);
    let empty = DataLoader::new(Probe::new(0), LoaderConfig::new(4)).unwrap();
    assert_eq!(empty.epoch(0).unwrap().count(), 0);
}

#[test]
fn batch_contents_equal_direct_dataset_access() {
    let raw: Vec<u8> = (0..40 * 4).map(|i| (i * 37 % 256) as u8).collect();
    let labels: Vec<u8> = (0..40).map(|i| (i * 3 % 10) as u8).collect();
    let data = MnistLike::from_raw(raw, [2, 2], labels).unwrap();
    let dataset = MnistDataset::new(data, Normalization::FASHION_MNIST);
    let loader = DataLoader::new(dataset, LoaderConfig::new(6).shuffled(1)).unwrap();
    let mut count = 0;
    for batch in loader.epoch(2).unwrap() {
        let batch = batch.unwrap();
        assert_eq!(batch.feature_dims, vec![batch.len(), 1, 2, 2]);
        assert_eq!(batch.features.len(), batch.len() * 4);
        for (k, &i) in batch.indices.iter().enumerate() {
            let (features, label) = loader.dataset().get(i).unwrap();
            assert_eq!(&batch.features[k * 4..(k + 1) * 4], &features[..]);
            assert_eq!(batch.labels[k], label);
            assert_eq!(label, (i * 3 % 10) as i64);
        }
        count += batch.len();
    }
    assert_eq!(count, 40);
}

#[test]
fn prefetching_and_inline_loading_give_identical_batches() {
    let inline =
        DataLoader::new(Probe::new(77), LoaderConfig::new(9).shuffled(3).prefetch(0)).unwrap();
    let ahead =
        DataLoader::new(Probe::new(77), LoaderConfig::new(9).shuffled(3).prefetch(4)).unwrap();
    assert_eq!(collect(&inline, 1), collect(&ahead, 1));
    // Features of a probe item are [i, -i, 0.5], its label i % 7.
    let b = &collect(&ahead, 0)[0];
    for (k, &i) in b.indices.iter().enumerate() {
        assert_eq!(&b.features[3 * k..3 * k + 3], &[i as f32, -(i as f32), 0.5]);
        assert_eq!(b.labels[k], (i % 7) as i64);
    }
}

#[test]
fn dropping_the_iterator_early_stops_the_worker() {
    let loader = DataLoader::new(Probe::new(100_000), LoaderConfig::new(10).prefetch(2)).unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let worker_loader = loader.clone();
    std::thread::spawn(move || {
        let mut it = worker_loader.epoch(0).unwrap();
        let first = it.next().unwrap().unwrap();
        assert_eq!(first.len(), 10);
        // Let the worker fill the channel and block on it.
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        drop(it);
        done_tx.send(started.elapsed()).unwrap();
    });
    let drop_time = done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("dropping the iterator hung");
    assert!(drop_time < Duration::from_secs(2), "{drop_time:?}");
    // The worker is joined: it made at most 1 consumed + 2 queued + 1 blocked batches, and makes
    // no more.
    let calls = loader.dataset().calls.load(Ordering::SeqCst);
    assert!(calls <= 4, "{calls} batches were built");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(loader.dataset().calls.load(Ordering::SeqCst), calls);
    // Dropping before taking anything is fine too.
    drop(loader.epoch(1).unwrap());
}

#[test]
fn dataset_errors_are_yielded_once_then_the_epoch_ends() {
    for prefetch in [0, 2] {
        let mut probe = Probe::new(30);
        probe.fail_at = Some(17);
        let loader =
            DataLoader::new(probe, LoaderConfig::new(5).sequential().prefetch(prefetch)).unwrap();
        let results: Vec<Result<Batch>> = loader.epoch(0).unwrap().collect();
        assert_eq!(results.len(), 4, "prefetch {prefetch}");
        assert!(results[..3].iter().all(|r| r.is_ok()));
        let err = results[3].as_ref().unwrap_err();
        assert!(err.to_string().contains("item 17 is broken"), "{err}");
    }
}

#[test]
fn a_panicking_dataset_becomes_a_worker_error() {
    let mut probe = Probe::new(30);
    probe.panic_at = Some(12);
    let loader = DataLoader::new(probe, LoaderConfig::new(5).sequential().prefetch(1)).unwrap();
    let results: Vec<Result<Batch>> = loader.epoch(0).unwrap().collect();
    assert_eq!(results.len(), 3);
    match &results[2] {
        Err(e @ Error::Worker { .. }) => {
            assert!(e.to_string().contains("probe panics on item 12"), "{e}")
        }
        other => panic!("expected a Worker error, got {other:?}"),
    }
}

#[test]
fn invalid_configuration_and_indices_are_errors() {
    assert!(matches!(
        DataLoader::new(Probe::new(3), LoaderConfig::new(0)),
        Err(Error::InvalidArgument { .. })
    ));
    let data = MnistLike::from_raw(vec![0; 8], [2, 2], vec![0, 1]).unwrap();
    let dataset = MnistDataset::new(data, Normalization::MNIST);
    let (mut f, mut l) = (Vec::new(), Vec::new());
    let err = dataset.fill_batch(&[1, 2], &mut f, &mut l).unwrap_err();
    assert!(err.to_string().contains("index 2"), "{err}");
    assert!(f.is_empty() && l.is_empty());
}

#[test]
fn normalisation_matches_hand_computed_values() {
    let n = Normalization::FASHION_MNIST;
    // (0/255 - 0.2860) / 0.3530 and (255/255 - 0.2860) / 0.3530.
    assert!((n.apply(0) - (-0.810_198_3)).abs() < 1e-6);
    assert!((n.apply(255) - 2.022_662_9).abs() < 1e-6);
    let table = Normalization::new(0.5, 0.25).unwrap().lookup_table();
    assert!((table[51] - (-1.2)).abs() < 1e-6); // 51/255 = 0.2
    assert!(Normalization::new(0.1, 0.0).is_err());
    assert!(Normalization::new(f32::NAN, 1.0).is_err());

    let data = MnistLike::from_raw(vec![0, 51, 102, 255], [2, 2], vec![9]).unwrap();
    let unit = MnistDataset::new(data, Normalization::UNIT_RANGE).flattened();
    assert_eq!(unit.item_dims(), &[4]);
    let (features, label) = unit.get(0).unwrap();
    assert_eq!(label, 9);
    let expected = [0.0, 0.2, 0.4, 1.0];
    assert!(
        features
            .iter()
            .zip(expected)
            .all(|(a, b)| (a - b).abs() < 1e-6),
        "{features:?}"
    );
}
