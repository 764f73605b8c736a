//! The [`Learner`]: a fit interrupted at any step (a callback error, after that step's
//! checkpoint) and resumed into fresh objects ends bit for bit like the uninterrupted fit;
//! callbacks see every event; early stopping ends a run and a resumed stopped run stays
//! stopped; the log holds the scalars.

use tessera_core::{DType, Error, Generator, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::data::{DataLoader, Dataset, LoaderConfig};
use tessera_nn::layers::{Dropout, DropoutConfig, Linear, LinearConfig, ReLU, Sequential};
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::run::RunDir;
use tessera_nn::schedule::CosineAnnealing;
use tessera_nn::training::{
    Callback, Control, EarlyStopping, EpochReport, EpochStart, FitReport, Learner, StepEnd,
};
use tessera_nn::Module;

type B = Cpu;
type Model = Sequential<(Linear<B>, ReLU, Dropout, Linear<B>)>;

/// 200 points of 5 features, 3 classes from the signs of two features.
#[derive(Clone)]
struct Points(Vec<f32>);

impl Dataset for Points {
    fn len(&self) -> usize {
        self.0.len() / 5
    }
    fn item_dims(&self) -> &[usize] {
        &[5]
    }
    fn fill_batch(&self, at: &[usize], x: &mut Vec<f32>, y: &mut Vec<i64>) -> Result<()> {
        if let Some(&bad) = at.iter().find(|&&i| i >= self.len()) {
            let msg = format!("no point {bad}");
            return Err(Error::InvalidArgument { op: "Points", msg });
        }
        for &i in at {
            let f = &self.0[5 * i..5 * i + 5];
            x.extend_from_slice(f);
            y.push(i64::from(f[0] > 0.0) + i64::from(f[1] > 0.5));
        }
        Ok(())
    }
}

fn loaders() -> (DataLoader<Points>, DataLoader<Points>) {
    let dev = Cpu::new();
    let points = Points(
        Tensor::<B>::randn([200, 5], DType::F32, 3, &dev)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
    );
    (
        DataLoader::new(points.clone(), LoaderConfig::new(16).shuffled(5)).unwrap(),
        DataLoader::new(points, LoaderConfig::new(64).sequential()).unwrap(),
    )
}

fn learner(seed: u64, epochs: usize) -> Learner<B, Model, AdamW<B>> {
    let dev = Cpu::new();
    let mut g = Generator::new(seed);
    let model = Sequential::new((
        LinearConfig::new(5, 16).init(&dev, &mut g).unwrap(),
        ReLU::new(),
        DropoutConfig::new().p(0.2).init(&mut g).unwrap(),
        LinearConfig::new(16, 3).init(&dev, &mut g).unwrap(),
    ));
    let optimizer = AdamW::new(model.parameters(), AdamWConfig::new(0.02)).unwrap();
    // 13 steps per epoch.
    let schedule = CosineAnnealing::new(0.02, 13 * epochs, 0.0).unwrap();
    Learner::new(model, optimizer)
        .epochs(epochs)
        .schedule(Box::new(schedule))
        .log_every(5)
}

/// Fails the run after step `at` (after its checkpoint), as a crash would.
struct CrashAt(usize);

impl Callback for CrashAt {
    fn on_step_end(&mut self, s: &StepEnd) -> Result<Control> {
        match s.global_step == self.0 {
            true => Err(Error::checkpoint("simulated crash")),
            false => Ok(Control::Continue),
        }
    }
}

fn bits(l: &Learner<B, Model, AdamW<B>>) -> Vec<(String, Vec<u64>)> {
    let to_bits = |t: &Tensor<B>| -> Vec<u64> {
        t.to_vec_f64()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect()
    };
    let mut out: Vec<(String, Vec<u64>)> = l
        .model()
        .state_dict()
        .iter()
        .map(|(n, t)| (n.clone(), to_bits(t)))
        .collect();
    out.extend(
        l.optimizer()
            .state()
            .iter()
            .map(|(n, t)| (n.clone(), to_bits(t))),
    );
    out
}

fn figures(r: &FitReport) -> Vec<[u64; 3]> {
    r.epochs
        .iter()
        .map(|e| {
            [
                e.train_loss.to_bits(),
                e.test_accuracy.to_bits(),
                e.test_loss.to_bits(),
            ]
        })
        .collect()
}

#[test]
fn an_interrupted_fit_resumes_bit_for_bit() {
    let dev = Cpu::new();
    let (train, test) = loaders();
    let config = serde_json::json!({"test": "learner"});
    let mut whole = learner(1, 3);
    let reference = whole.fit(&train, &test, &dev).unwrap();
    assert_eq!(reference.epochs.len(), 3);
    assert_eq!(reference.global_step, 39);

    for crash in [4, 13, 20, 38] {
        let tmp = tempfile::tempdir().unwrap();
        let open = || RunDir::open(tmp.path()).unwrap();
        let mut first = learner(1, 3)
            .run_dir(open(), config.clone(), Some(3), false)
            .callback(Box::new(CrashAt(crash)));
        assert!(first.fit(&train, &test, &dev).is_err());
        // Another process: fresh objects, differently initialised.
        let mut second = learner(9, 3).run_dir(open(), config.clone(), Some(3), true);
        let report = second.fit(&train, &test, &dev).unwrap();
        assert!(report.resumed_from_step.is_some(), "crash at {crash}");
        assert_eq!(figures(&report), figures(&reference), "crash at {crash}");
        assert_eq!(bits(&second), bits(&whole), "crash at {crash}");
    }
}

/// Counts the events it sees.
#[derive(Default)]
struct Counter {
    starts: Vec<EpochStart>,
    steps: usize,
    ends: Vec<usize>,
}

/// A [`Counter`] the test keeps a handle on.
struct Counting(std::rc::Rc<std::cell::RefCell<Counter>>);

impl Callback for Counting {
    fn on_epoch_start(&mut self, e: &EpochStart) -> Result<()> {
        self.0.borrow_mut().starts.push(*e);
        Ok(())
    }
    fn on_step_end(&mut self, _: &StepEnd) -> Result<Control> {
        self.0.borrow_mut().steps += 1;
        Ok(Control::Continue)
    }
    fn on_epoch_end(&mut self, r: &EpochReport) -> Result<Control> {
        self.0.borrow_mut().ends.push(r.epoch);
        Ok(Control::Continue)
    }
}

#[test]
fn callbacks_see_every_event_and_early_stopping_ends_the_run_for_good() {
    let dev = Cpu::new();
    let (train, test) = loaders();
    let counter = std::rc::Rc::new(std::cell::RefCell::new(Counter::default()));
    let mut l = learner(1, 2).callback(Box::new(Counting(counter.clone())));
    l.fit(&train, &test, &dev).unwrap();
    let c = counter.borrow();
    assert_eq!(c.steps, 26);
    assert_eq!(c.ends, vec![1, 2]);
    assert_eq!(c.starts.len(), 2);
    assert_eq!(
        (c.starts[1].epoch, c.starts[1].steps, c.starts[1].done),
        (1, 13, 0)
    );

    // Patience 1 with an impossible improvement: stops after epoch 2 of 50, and a resumed
    // stopped run does not train again.
    let tmp = tempfile::tempdir().unwrap();
    let config = serde_json::json!({"test": "early stopping"});
    let open = || RunDir::open(tmp.path()).unwrap();
    let mut l = learner(1, 50)
        .run_dir(open(), config.clone(), None, false)
        .callback(Box::new(EarlyStopping::new(1, 1.0)));
    let report = l.fit(&train, &test, &dev).unwrap();
    assert!(report.stopped_early);
    assert_eq!(report.epochs.len(), 2);
    let mut again = learner(1, 50).run_dir(open(), config, None, true);
    let resumed = again.fit(&train, &test, &dev).unwrap();
    assert_eq!(resumed.epochs.len(), 2);
    assert_eq!(resumed.global_step, report.global_step);
}

#[test]
fn the_log_holds_the_scalars_of_every_interval_and_epoch() {
    let dev = Cpu::new();
    let (train, test) = loaders();
    let tmp = tempfile::tempdir().unwrap();
    let mut l = learner(1, 2).log_dir(tmp.path());
    l.fit(&train, &test, &dev).unwrap();
    let text = std::fs::read_to_string(tmp.path().join("metrics.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Steps 5 and 10 of each epoch (every 5 steps of 13), then the epoch's line.
    let steps: Vec<u64> = lines.iter().map(|v| v["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, vec![5, 10, 13, 18, 23, 26]);
    for tag in [
        "train/loss",
        "train/lr",
        "train/grad_norm",
        "train/samples_per_s",
    ] {
        assert!(lines[0][tag].as_f64().unwrap().is_finite(), "{tag}");
    }
    assert!(lines[2]["test/accuracy"].as_f64().unwrap() > 0.3);
}

/// A run checkpointed inside an epoch on 2 ranks and resumed on 3: the items the 2 ranks had
/// trained on are not dealt again, every other item of the epoch is (once, but for the padding
/// that makes the 3 shares equal).
mod another_number_of_ranks {
    use super::{CrashAt, Points};
    use crate::thread_comm::on_ranks;
    use serde_json::json;
    use std::sync::{Arc, Mutex};
    use tessera_core::{DType, Generator, Result, Tensor};
    use tessera_cpu::Cpu;
    use tessera_nn::data::{DataLoader, Dataset, LoaderConfig};
    use tessera_nn::distributed::{Communicator, DistributedSampler, ShardLevel, ShardedOptimizer};
    use tessera_nn::layers::{LinearConfig, ReLU, Sequential};
    use tessera_nn::optim::{AdamW, AdamWConfig};
    use tessera_nn::run::RunDir;
    use tessera_nn::training::Learner;
    use tessera_nn::Module;

    /// [`Points`] that logs every item it is asked for.
    #[derive(Clone)]
    struct Logged {
        points: Points,
        log: Arc<Mutex<Vec<usize>>>,
    }

    impl Dataset for Logged {
        fn len(&self) -> usize {
            self.points.len()
        }
        fn item_dims(&self) -> &[usize] {
            self.points.item_dims()
        }
        fn fill_batch(&self, at: &[usize], x: &mut Vec<f32>, y: &mut Vec<i64>) -> Result<()> {
            self.log.lock().unwrap().extend_from_slice(at);
            self.points.fill_batch(at, x, y)
        }
    }

    const ITEMS: usize = 50;
    const BATCH: usize = 4;

    /// Fits one epoch on `world` thread ranks into `dir` (resuming with `resume`, checkpoints
    /// every 2 steps, crashing after step `crash_at` if given); returns the items fetched for
    /// training, over all ranks, and rank 0's outcome.
    fn fit_on(
        world: usize,
        dir: &std::path::Path,
        resume: bool,
        crash_at: Option<usize>,
    ) -> (Vec<usize>, Result<tessera_nn::training::FitReport>) {
        let dev = Cpu::new();
        let values = Tensor::<Cpu>::randn([ITEMS, 5], DType::F32, 3, &dev).unwrap();
        let points = Points(values.to_vec::<f32>().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let outcomes = on_ranks(world, |comm| {
            let dev = Cpu::new();
            let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
            let rank = comm.rank();
            let train = Logged {
                points: points.clone(),
                log: log.clone(),
            };
            // No read-ahead: the items fetched are the items trained on.
            let train = DataLoader::new(train, LoaderConfig::new(BATCH).prefetch(0)).unwrap();
            let test = DataLoader::new(points.clone(), LoaderConfig::new(16).sequential()).unwrap();
            let mut g = Generator::new(1);
            let model = Sequential::new((
                LinearConfig::new(5, 8).init(&dev, &mut g).unwrap(),
                ReLU::new(),
                LinearConfig::new(8, 3).init(&dev, &mut g).unwrap(),
            ));
            let adamw = |p| AdamW::new(p, AdamWConfig::new(0.01));
            let level = ShardLevel::Gradients;
            let optimizer =
                ShardedOptimizer::new(model.parameters(), comm.clone(), level, 64, adamw).unwrap();
            let sampler = DistributedSampler::new(ITEMS, rank, world)
                .unwrap()
                .shuffled(9);
            let mut learner = Learner::new(model, optimizer)
                .epochs(1)
                .communicator(comm)
                .sampler(sampler)
                .run_dir(
                    RunDir::open(dir).unwrap(),
                    json!({ "world_size": world }),
                    Some(2),
                    resume,
                );
            if let Some(step) = crash_at {
                learner = learner.callback(Box::new(CrashAt(step)));
            }
            learner.fit(&train, &test, &dev)
        });
        let fetched = log.lock().unwrap().clone();
        (fetched, outcomes.into_iter().next().unwrap())
    }

    #[test]
    fn a_checkpoint_inside_an_epoch_resumes_on_another_number_of_ranks_with_the_rest_of_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        // 2 ranks: 2 steps of 2 batches of 4 (16 items), a checkpoint, a crash.
        let (before, crashed) = fit_on(2, &dir, false, Some(2));
        assert!(crashed.is_err());
        assert_eq!(before.len(), 2 * 2 * BATCH);
        // 3 ranks: the 34 items left, padded to 36, 12 per rank: 3 steps of 4.
        let (after, report) = fit_on(3, &dir, true, None);
        let report = report.unwrap();
        assert_eq!(report.resumed_from_step, Some(2));
        assert_eq!(report.global_step, 2 + 3);
        assert_eq!(report.epochs.len(), 1);
        assert_eq!(after.len(), 36);
        let mut seen = [0usize; ITEMS];
        for &item in before.iter().chain(&after) {
            seen[item] += 1;
        }
        assert!(
            seen.iter().all(|&n| n >= 1),
            "an item was never trained on: {seen:?}"
        );
        for &item in &before {
            assert_eq!(
                seen[item], 1,
                "item {item}, trained before the checkpoint, came again"
            );
        }
        assert_eq!(seen.iter().sum::<usize>(), ITEMS + 2);
    }
}
