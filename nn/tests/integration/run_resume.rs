//! Whole-run checkpoints (`tessera_nn::run`): a run stopped at any checkpoint and resumed into
//! fresh objects ends bit for bit where the uninterrupted run ends (parameters, buffers,
//! optimizer moments, dropout streams, host state); torn and corrupt checkpoints fall back to
//! older ones; mismatches are typed errors that change nothing.

use serde_json::{json, Value};
use std::fs;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{
    BatchNorm1d, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig, ReLU, Sequential,
};
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::run::{f64_from_json, f64_to_json, resume, save_checkpoint, RunDir};
use tessera_nn::training::train_step;
use tessera_nn::Module;

type B = Cpu;
type Model = Sequential<(Linear<B>, BatchNorm1d<B>, ReLU, Dropout, Linear<B>)>;

fn model(seed: u64, width: usize, dev: &B) -> Model {
    let mut g = Generator::new(seed);
    Sequential::new((
        LinearConfig::new(6, width).init(dev, &mut g).unwrap(),
        BatchNormConfig::new(width).init_1d(dev).unwrap(),
        ReLU::new(),
        DropoutConfig::new().p(0.3).init(&mut g).unwrap(),
        LinearConfig::new(width, 3).init(dev, &mut g).unwrap(),
    ))
}

fn optimizer(m: &Model) -> AdamW<B> {
    AdamW::new(m.parameters(), AdamWConfig::new(0.01)).unwrap()
}

fn batch(step: u64, dev: &B) -> (Tensor<B>, Tensor<B>) {
    let x = Tensor::<B>::randn([16, 6], DType::F32, 100 + step, dev).unwrap();
    let labels: Vec<i64> = (0..16).map(|i| (i * 5 + step as i64) % 3).collect();
    (x, Tensor::from_vec(labels, [16], dev).unwrap())
}

fn config() -> Value {
    json!({"model": "test-mlp", "lr": 0.01, "steps": 12})
}

/// Every bit of the model (parameters and buffers by name) and the optimizer state.
fn fingerprint(m: &Model, o: &AdamW<B>) -> Vec<(String, Vec<u64>)> {
    let mut out: Vec<(String, Vec<u64>)> = m
        .state_dict()
        .into_iter()
        .map(|(n, t)| (n, bits(&t)))
        .collect();
    out.extend(
        o.state()
            .into_iter()
            .map(|(n, t)| (format!("optim.{n}"), bits(&t))),
    );
    out
}

fn bits(t: &Tensor<B>) -> Vec<u64> {
    t.to_vec_f64()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

/// Trains steps `from..to`, saving a checkpoint after each step in `save_at`; the host state
/// is the running loss sum.
fn train(
    m: &Model,
    o: &mut AdamW<B>,
    from: u64,
    to: u64,
    mut loss_sum: f64,
    save: Option<(&RunDir, &[u64])>,
    dev: &B,
) -> f64 {
    for step in from..to {
        let (x, y) = batch(step, dev);
        loss_sum += train_step(m, o, x, &y).unwrap().to_scalar_f64().unwrap();
        if let Some((dir, at)) = save {
            if at.contains(&(step + 1)) {
                let state = json!({"loss_sum": f64_to_json(loss_sum)});
                save_checkpoint(dir, step + 1, m, &[("adamw", &*o)], &config(), &state).unwrap();
            }
        }
    }
    loss_sum
}

#[test]
fn a_resumed_run_ends_bit_for_bit_where_the_uninterrupted_one_ends() {
    let dev = Cpu::new();
    let reference = model(1, 8, &dev);
    let mut reference_opt = optimizer(&reference);
    let reference_loss = train(&reference, &mut reference_opt, 0, 12, 0.0, None, &dev);

    for stop in [1u64, 5, 11] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::open(tmp.path()).unwrap();
        let first = model(1, 8, &dev);
        let mut first_opt = optimizer(&first);
        train(
            &first,
            &mut first_opt,
            0,
            stop,
            0.0,
            Some((&dir, &[stop])),
            &dev,
        );
        drop((first, first_opt)); // the process dies

        // Fresh objects, initialised differently: everything comes from the checkpoint.
        let resumed = model(77, 8, &dev);
        let mut resumed_opt = optimizer(&resumed);
        let found = resume(
            &dir,
            &resumed,
            &mut [("adamw", &mut resumed_opt)],
            &config(),
            &dev,
        )
        .unwrap()
        .expect("a checkpoint");
        assert_eq!(found.step, stop);
        assert!(found.skipped.is_empty());
        let loss_sum = f64_from_json(&found.state["loss_sum"], "loss_sum").unwrap();
        let end = train(&resumed, &mut resumed_opt, stop, 12, loss_sum, None, &dev);
        assert_eq!(end.to_bits(), reference_loss.to_bits(), "stopped at {stop}");
        assert_eq!(
            fingerprint(&resumed, &resumed_opt),
            fingerprint(&reference, &reference_opt),
            "stopped at {stop}"
        );
        assert!(dir.run_config_path().exists());
    }
}

#[test]
fn an_empty_folder_is_a_fresh_run() {
    let dev = Cpu::new();
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::open(tmp.path()).unwrap();
    let m = model(1, 8, &dev);
    let mut o = optimizer(&m);
    let found = resume(&dir, &m, &mut [("adamw", &mut o)], &config(), &dev).unwrap();
    assert!(found.is_none());
}

/// A folder with checkpoints at steps 2 and 4 (kept: 3) of a run of `config()`.
fn folder_with_two_checkpoints(dev: &B) -> (tempfile::TempDir, RunDir) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::open(tmp.path()).unwrap();
    let m = model(1, 8, dev);
    let mut o = optimizer(&m);
    train(&m, &mut o, 0, 4, 0.0, Some((&dir, &[2, 4])), dev);
    (tmp, dir)
}

#[test]
fn a_torn_or_corrupt_newest_checkpoint_falls_back_to_the_one_before() {
    let dev = Cpu::new();
    type Damage = fn(&RunDir);
    let damages: [(&str, Damage); 4] = [
        ("truncated", |d| {
            let p = d.checkpoint_path(4);
            let bytes = fs::read(&p).unwrap();
            fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        }),
        ("one flipped bit", |d| {
            let p = d.checkpoint_path(4);
            let mut bytes = fs::read(&p).unwrap();
            let at = bytes.len() - 3;
            bytes[at] ^= 0x10;
            fs::write(&p, bytes).unwrap();
        }),
        ("file missing", |d| {
            fs::remove_file(d.checkpoint_path(4)).unwrap()
        }),
        ("manifest garbled", |d| {
            fs::write(d.manifest_path(4), b"{\"step\":").unwrap()
        }),
    ];
    for (what, damage) in damages {
        let (_tmp, dir) = folder_with_two_checkpoints(&dev);
        damage(&dir);
        let m = model(9, 8, &dev);
        let mut o = optimizer(&m);
        let found = resume(&dir, &m, &mut [("adamw", &mut o)], &config(), &dev)
            .unwrap()
            .unwrap_or_else(|| panic!("{what}: nothing restored"));
        assert_eq!(found.step, 2, "{what}");
        assert_eq!(found.skipped.len(), 1, "{what}");
        assert!(
            found.skipped[0].starts_with("step 4"),
            "{what}: {:?}",
            found.skipped
        );
    }
    // Nothing whole left: an error naming each reason.
    let (_tmp, dir) = folder_with_two_checkpoints(&dev);
    fs::remove_file(dir.checkpoint_path(4)).unwrap();
    fs::write(dir.checkpoint_path(2), b"junk").unwrap();
    let m = model(9, 8, &dev);
    let mut o = optimizer(&m);
    let e = resume(&dir, &m, &mut [("adamw", &mut o)], &config(), &dev)
        .unwrap_err()
        .to_string();
    assert!(e.contains("step 4") && e.contains("step 2"), "{e}");
}

#[test]
fn mismatches_are_errors_naming_them_and_change_nothing() {
    let dev = Cpu::new();
    let (_tmp, dir) = folder_with_two_checkpoints(&dev);

    // Another configuration: the differing field is named.
    let m = model(9, 8, &dev);
    let mut o = optimizer(&m);
    let before = fingerprint(&m, &o);
    let other = json!({"model": "test-mlp", "lr": 0.02, "steps": 12});
    let e = resume(&dir, &m, &mut [("adamw", &mut o)], &other, &dev)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`lr`") && e.contains("0.01") && e.contains("0.02"),
        "{e}"
    );
    assert_eq!(fingerprint(&m, &o), before);

    // Another model shape.
    let wide = model(9, 16, &dev);
    let mut wide_opt = optimizer(&wide);
    let before = fingerprint(&wide, &wide_opt);
    let e = resume(
        &dir,
        &wide,
        &mut [("adamw", &mut wide_opt)],
        &config(),
        &dev,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("0.weight"), "{e}");
    assert_eq!(fingerprint(&wide, &wide_opt), before);

    // Other optimizer groups.
    let e = resume(&dir, &m, &mut [("decay", &mut o)], &config(), &dev)
        .unwrap_err()
        .to_string();
    assert!(e.contains("adamw") && e.contains("decay"), "{e}");
    assert_eq!(
        fingerprint(&m, &o),
        fingerprint(&model(9, 8, &dev), &optimizer(&m))
    );
}
