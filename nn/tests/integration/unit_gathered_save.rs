//! Level 3's files written without holding the model whole: a GPT's blocks sharded over three
//! thread ranks and left released, saved through `run::save_gathered_checkpoint`,
//! `run::save_gathered_model` and `gpt::save_checkpoint_gathered` (each block's parameters
//! gathered to rank 0 as it is written). Each file holds what the plain model's one-process
//! save holds (trained on the same batches), tensor for tensor and bit for bit; the blocks stay
//! released on every rank; a file rank 0 cannot write is an error on every rank.

use crate::thread_comm::on_ranks;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{DType, Generator, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint;
use tessera_nn::data::CharTokenizer;
use tessera_nn::distributed::{Communicator, ShardedOptimizer, ShardedUnits};
use tessera_nn::gpt::{save_checkpoint, save_checkpoint_gathered, Gpt, GptConfig, MODEL_FILE};
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::run::{self, RunDir};
use tessera_nn::Module;

const RANKS: usize = 3;
const TEXT: &str = "abcdefghijk";

fn gpt(dev: &Cpu) -> Gpt<Cpu> {
    GptConfig::new(3, 2, 16, 8, TEXT.len())
        .init(dev, &mut Generator::new(33))
        .unwrap()
}

fn adamw(params: Vec<(String, Var<Cpu>)>) -> Result<AdamW<Cpu>> {
    AdamW::new(params, AdamWConfig::new(0.01))
}

/// One optimizer step on two windows of 8 tokens drawn from `seed` (the same on every rank).
fn step(model: &Gpt<Cpu>, optimizer: &mut dyn Optimizer<Cpu>, seed: u64) {
    let dev = Cpu::new();
    let tokens: Vec<i64> = (0..2 * 9)
        .map(|i| ((i as u64 * 3 + seed * 5) % TEXT.len() as u64) as i64)
        .collect();
    let all = Tensor::from_vec(tokens, [2, 9], &dev).unwrap();
    let x = all.narrow(1, 0, 8).unwrap().contiguous().unwrap();
    let y = all.narrow(1, 1, 8).unwrap().contiguous().unwrap();
    optimizer.zero_grad();
    model.loss(&x, &y).unwrap().backward().unwrap();
    optimizer.step().unwrap();
}

/// A file's tensors (name, dims, dtype, bits) in name order and its metadata.
type Contents = (
    Vec<(String, Vec<usize>, DType, Vec<u64>)>,
    Vec<(String, String)>,
);

fn contents(path: &Path) -> Contents {
    let file = checkpoint::load(path, &Cpu::new()).unwrap();
    let mut tensors: Vec<_> = file
        .tensors
        .iter()
        .map(|(name, t)| {
            let values = t.to_vec_f64().unwrap();
            let bits = values.into_iter().map(f64::to_bits).collect();
            (name.clone(), t.dims().to_vec(), t.dtype(), bits)
        })
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    (tensors, file.metadata.into_iter().collect())
}

/// Every parameter's bits.
fn bits(model: &Gpt<Cpu>) -> Vec<u32> {
    let params = model.parameters();
    let values = params
        .iter()
        .flat_map(|(_, v)| v.value().to_vec::<f32>().unwrap());
    values.map(f32::to_bits).collect()
}

/// Fails naming the first tensor (or the metadata) where the two files differ.
fn assert_same(got: &Path, want: &Path, what: &str) {
    let (got, want) = (contents(got), contents(want));
    let names = |c: &Contents| c.0.iter().map(|t| t.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&got), names(&want), "{what}: the tensors' names");
    for (g, w) in got.0.iter().zip(&want.0) {
        assert!(g == w, "{what}: {} differs", g.0);
    }
    assert_eq!(got.1, want.1, "{what}: the metadata");
}

fn run_config() -> serde_json::Value {
    json!({ "model": "gpt", "world_size": RANKS })
}

#[test]
fn released_blocks_are_written_a_block_at_a_time_as_the_plain_model_saves_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (plain_dir, dir) = (tmp.path().join("plain"), tmp.path().join("level3"));
    let tokenizer = CharTokenizer::from_text(TEXT);
    let state = json!({ "epoch": 0 });

    // The plain model, trained in one process on the same batches, saved the ordinary way.
    let dev = Cpu::new();
    let plain_model = gpt(&dev);
    let mut plain = adamw(plain_model.parameters()).unwrap();
    (0..2).for_each(|s| step(&plain_model, &mut plain, s));
    let plain_run = RunDir::open(&plain_dir).unwrap();
    let groups: &[(&str, &dyn Optimizer<Cpu>)] = &[("opt", &plain)];
    run::save_checkpoint(&plain_run, 2, &plain_model, groups, &run_config(), &state).unwrap();
    plain_run.save_model(&plain_model).unwrap();
    save_checkpoint(plain_dir.join("gpt"), &plain_model, &tokenizer, json!({})).unwrap();

    step(&plain_model, &mut plain, 2);
    let plain_bits = bits(&plain_model);

    let ranks_bits = on_ranks(RANKS, |comm| {
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let dev = Cpu::new();
        let model = gpt(&dev);
        let units = ShardedUnits::new(comm.clone(), model.block_prefixes()).unwrap();
        let mut sharded =
            ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
        model.shard_blocks(units.clone()).unwrap();
        units.release_all().unwrap();
        (0..2).for_each(|s| step(&model, &mut sharded, s));

        let run_dir = RunDir::open(&dir).unwrap();
        let groups: &[(&str, &dyn Optimizer<Cpu>)] = &[("opt", &sharded)];
        let (config, units_ref) = (run_config(), Some(&*units));
        run::save_gathered_checkpoint(
            &run_dir, 2, &model, units_ref, groups, &config, &state, &*comm,
        )
        .unwrap();
        run::save_gathered_model(
            &run_dir.model_path(),
            &model,
            units_ref,
            &Default::default(),
            &*comm,
        )
        .unwrap();
        save_checkpoint_gathered(
            dir.join("gpt"),
            &model,
            units_ref,
            &tokenizer,
            json!({}),
            &*comm,
        )
        .unwrap();
        // Nothing held the blocks whole.
        assert!(!units.is_held() && units.held_only_on().is_none());

        // A folder that does not exist: rank 0 cannot spool, and every rank is told.
        let nowhere = dir.join("missing").join(MODEL_FILE);
        let failed =
            run::save_gathered_model(&nowhere, &model, units_ref, &Default::default(), &*comm);
        assert!(failed.is_err(), "rank {}", comm.rank());

        // Training goes on after the saves, as the plain model's.
        step(&model, &mut sharded, 2);
        units.gather_all().unwrap();
        bits(&model)
    });
    for (rank, got) in ranks_bits.iter().enumerate() {
        assert!(
            *got == plain_bits,
            "rank {rank}'s parameters after the saves"
        );
    }

    let plain_run = RunDir::open(&plain_dir).unwrap();
    let run_dir = RunDir::open(&dir).unwrap();
    let checkpoint = |run: &RunDir| run.checkpoint_path(2);
    assert_same(
        &checkpoint(&run_dir),
        &checkpoint(&plain_run),
        "the run checkpoint",
    );
    let model = |run: &RunDir| run.model_path();
    assert_same(&model(&run_dir), &model(&plain_run), "model.safetensors");
    let (gpt_dir, plain_gpt) = (dir.join("gpt"), plain_dir.join("gpt"));
    let weights = |dir: &Path| dir.join(MODEL_FILE);
    assert_same(
        &weights(&gpt_dir),
        &weights(&plain_gpt),
        "the GPT folder's weights",
    );
    for file in ["vocab.json", "config.json"] {
        assert_eq!(
            std::fs::read(gpt_dir.join(file)).unwrap(),
            std::fs::read(plain_gpt.join(file)).unwrap(),
            "{file}"
        );
    }
    assert!(!dir.join("missing").exists());
}
