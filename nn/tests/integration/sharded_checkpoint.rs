//! Sharded run checkpoints (`run::save_sharded_checkpoint`) over thread ranks: each rank's
//! file holds only its pieces, the pieces put together are what a one-file save of the same
//! state holds (checked through `run::consolidate_checkpoint`), and a run resumes from them
//! at another number of ranks bit for bit, at levels 2 and 3. A damaged rank file is skipped
//! for the checkpoint before, as a damaged one-file checkpoint is. The one-file checkpoint
//! written a bucket at a time (`run::save_gathered_checkpoint`) is the one-file save's, bit
//! for bit.

use crate::thread_comm::{on_ranks, ThreadComm};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint;
use tessera_nn::distributed::{
    save_on_rank0, Communicator, ShardLevel, ShardedOptimizer, ShardedUnits,
};
use tessera_nn::gpt::{Gpt, GptConfig};
use tessera_nn::layers::{Linear, LinearConfig, ReLU, Sequential};
use tessera_nn::loss::cross_entropy;
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::run::{self, RunDir};
use tessera_nn::{Forward, Module};

type Mlp = Sequential<(Linear<Cpu>, ReLU, Linear<Cpu>)>;

/// Small enough that buckets hold several parameters and shares cut through them.
const BUCKET_BYTES: usize = 256;

fn mlp(seed: u64, dev: &Cpu) -> Mlp {
    let mut g = Generator::new(seed);
    let linear = |i, o, g: &mut Generator| {
        LinearConfig::new(i, o)
            .dtype(DType::F64)
            .init(dev, g)
            .unwrap()
    };
    Sequential::new((linear(6, 8, &mut g), ReLU::new(), linear(8, 3, &mut g)))
}

fn adamw(params: Vec<(String, Var<Cpu>)>) -> tessera_core::Result<AdamW<Cpu>> {
    AdamW::new(
        params,
        AdamWConfig {
            weight_decay: 0.1,
            ..AdamWConfig::new(0.01)
        },
    )
}

fn comm_of(comm: ThreadComm) -> Arc<dyn Communicator<Cpu>> {
    Arc::new(comm)
}

/// The loss every rank takes a step on: the same batch everywhere, rank 0's loss scaled by the
/// world size and the others' by zero, so that the ranks' mean gradient is the batch's gradient
/// exactly for any power-of-two number of ranks (and the run does not depend on it).
fn scaled(loss: Var<Cpu>, comm: &dyn Communicator<Cpu>) -> Var<Cpu> {
    let factor = match comm.rank() {
        0 => comm.world_size() as f64,
        _ => 0.0,
    };
    loss.mul_scalar(factor).unwrap()
}

fn mlp_step(
    model: &Mlp,
    optimizer: &mut dyn Optimizer<Cpu>,
    step: u64,
    comm: &dyn Communicator<Cpu>,
) {
    let dev = Cpu::new();
    let x = Tensor::randn([12, 6], DType::F64, 100 + step, &dev).unwrap();
    let y = Tensor::from_vec((0..12).map(|i| i % 3).collect::<Vec<i64>>(), [12], &dev).unwrap();
    let loss = cross_entropy(&model.forward(&Var::constant(x)).unwrap(), &y).unwrap();
    optimizer.zero_grad();
    scaled(loss, comm).backward().unwrap();
    optimizer.step().unwrap();
}

fn bits(model: &impl Module<Cpu>) -> Vec<u64> {
    model
        .parameters()
        .iter()
        .flat_map(|(_, v)| v.value().to_vec_f64().unwrap())
        .map(f64::to_bits)
        .collect()
}

fn config(world: usize) -> serde_json::Value {
    json!({ "model": "mlp", "world_size": world })
}

/// A tensor as (name, dims, dtype, bits of its values).
type TensorBits = (String, Vec<usize>, DType, Vec<u64>);

/// Every tensor of a checkpoint file, and its metadata.
fn contents(path: &Path) -> (Vec<TensorBits>, Vec<(String, String)>) {
    let file = checkpoint::load(path, &Cpu::new()).unwrap();
    let tensors = file
        .tensors
        .iter()
        .map(|(name, t)| {
            let values = t
                .to_vec_f64()
                .unwrap()
                .into_iter()
                .map(f64::to_bits)
                .collect();
            (name.clone(), t.dims().to_vec(), t.dtype(), values)
        })
        .collect();
    (tensors, file.metadata.into_iter().collect())
}

/// Trains an MLP for 3 steps on `world` ranks at `level`, then saves the same state three
/// ways: gathered whole and written by rank 0, sharded, and gathered a bucket at a time
/// (`run::save_gathered_checkpoint`, into `gathered`).
fn save_three_ways(world: usize, level: ShardLevel, whole: &Path, sharded: &Path, gathered: &Path) {
    on_ranks(world, |comm| {
        let dev = Cpu::new();
        let comm = comm_of(comm);
        let model = mlp(7, &dev);
        let mut opt =
            ShardedOptimizer::new(model.parameters(), comm.clone(), level, BUCKET_BYTES, adamw)
                .unwrap();
        for s in 0..3 {
            mlp_step(&model, &mut opt, s, &*comm);
        }
        let state = json!({ "epoch": 1 });
        let whole = RunDir::open(whole).unwrap();
        opt.prepare_checkpoint().unwrap();
        save_on_rank0(&*comm, || {
            let groups: &[(&str, &dyn Optimizer<Cpu>)] = &[("opt", &opt)];
            run::save_checkpoint(&whole, 3, &model, groups, &config(world), &state).map(|_| ())
        })
        .unwrap();
        opt.finish_checkpoint();
        let sharded = RunDir::open(sharded).unwrap();
        let groups: &[(&str, &dyn Optimizer<Cpu>)] = &[("opt", &opt)];
        run::save_sharded_checkpoint(&sharded, 3, &model, groups, &config(world), &state, &*comm)
            .unwrap();
        let gathered = RunDir::open(gathered).unwrap();
        let path = run::save_gathered_checkpoint(
            &gathered,
            3,
            &model,
            None,
            groups,
            &config(world),
            &state,
            &*comm,
        )
        .unwrap();
        assert_eq!(path, gathered.checkpoint_path(3));
    });
}

#[test]
fn a_sharded_save_puts_together_into_what_a_one_file_save_writes() {
    for (world, level) in [
        (2, ShardLevel::Gradients),
        (3, ShardLevel::OptimizerState),
        (4, ShardLevel::Gradients),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (whole, sharded) = (tmp.path().join("whole"), tmp.path().join("sharded"));
        let gathered = tmp.path().join("gathered");
        save_three_ways(world, level, &whole, &sharded, &gathered);
        let sharded_dir = RunDir::open(&sharded).unwrap();
        let files: Vec<_> = (0..world)
            .map(|r| sharded_dir.shard_path(3, r, world))
            .collect();
        let whole_dir = RunDir::open(&whole).unwrap();
        let numel = |p: &Path| -> usize {
            let file = checkpoint::load(p, &Cpu::new()).unwrap();
            file.tensors.values().map(|t| t.numel()).sum()
        };
        let whole_numel = numel(&whole_dir.checkpoint_path(3));
        // No rank writes the whole state: every other rank holds its share of each bucket's
        // parameters and moments (1/world of them, give or take a bucket's rounding).
        for file in &files[1..] {
            let n = numel(file);
            assert!(
                n * world <= whole_numel + 3 * world * 4 && n > 0,
                "{world} ranks: {} holds {n} of {whole_numel} elements",
                file.display()
            );
        }
        let path = run::consolidate_checkpoint(&sharded_dir, 3, &Cpu::new()).unwrap();
        assert_eq!(path, sharded_dir.checkpoint_path(3));
        assert_eq!(
            contents(&path),
            contents(&whole_dir.checkpoint_path(3)),
            "{world} ranks"
        );
        assert!(
            files.iter().all(|f| !f.exists()),
            "the ranks' files are removed"
        );
        // The consolidated checkpoint is an ordinary one (its manifest checks it).
        let manifest = run::Manifest::read(&sharded_dir.manifest_path(3)).unwrap();
        assert!(!manifest.is_sharded());
        manifest.verify(&std::fs::read(&path).unwrap()).unwrap();
        // Gathered a bucket at a time: the same file content, an ordinary manifest.
        let gathered_dir = RunDir::open(&gathered).unwrap();
        let path = gathered_dir.checkpoint_path(3);
        assert_eq!(
            contents(&path),
            contents(&whole_dir.checkpoint_path(3)),
            "{world} ranks, gathered a bucket at a time"
        );
        let manifest = run::Manifest::read(&gathered_dir.manifest_path(3)).unwrap();
        manifest.verify(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(gathered_dir.steps().unwrap(), [3]);
    }
}

/// The elements of some named tensors.
fn numel_of(tensors: &[(String, Tensor<Cpu>)]) -> usize {
    tensors.iter().map(|(_, t)| t.numel()).sum()
}

/// Named tensors as (name, bits), sorted by name.
fn sorted_bits(tensors: Vec<(String, Tensor<Cpu>)>) -> Vec<(String, Vec<u64>)> {
    let mut out: Vec<_> = tensors
        .into_iter()
        .map(|(n, t)| {
            let values = t.to_vec_f64().unwrap();
            (n, values.into_iter().map(f64::to_bits).collect())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_sharded_optimizer_hands_its_whole_state_over_a_bucket_at_a_time() {
    on_ranks(2, |comm| {
        let dev = Cpu::new();
        let comm = comm_of(comm);
        let model = mlp(7, &dev);
        let level = ShardLevel::Gradients;
        let mut opt =
            ShardedOptimizer::new(model.parameters(), comm.clone(), level, BUCKET_BYTES, adamw)
                .unwrap();
        for s in 0..3 {
            mlp_step(&model, &mut opt, s, &*comm);
        }
        let mut parts = Vec::new();
        opt.visit_consolidated_state(&mut |part| {
            parts.push(part);
            Ok(())
        })
        .unwrap();
        opt.prepare_checkpoint().unwrap();
        let whole = opt.state();
        opt.finish_checkpoint();
        // Several parts, none holding more than one bucket's state (two moments of at most
        // a bucket's capacity or its one larger parameter, and step counts), together the
        // whole state bit for bit on rank 0, which they are gathered to; rank 1 is visited as
        // often, with the step counts only (nothing gathered into it).
        assert!(parts.len() > 2, "{} parts", parts.len());
        if comm.rank() == 0 {
            let largest = parts.iter().map(|p| numel_of(p)).max().unwrap();
            let params = model.parameters();
            let biggest = params.iter().map(|(_, v)| v.numel()).max().unwrap();
            let bound = 2 * biggest.max(BUCKET_BYTES / 8) + params.len();
            assert!(
                largest <= bound && largest < numel_of(&whole),
                "a part of {largest} elements of {} (bound {bound})",
                numel_of(&whole)
            );
            assert_eq!(sorted_bits(parts.concat()), sorted_bits(whole));
        } else {
            let scalars: Vec<_> = whole.into_iter().filter(|(_, t)| t.rank() == 0).collect();
            assert!(!scalars.is_empty());
            assert_eq!(sorted_bits(parts.concat()), sorted_bits(scalars));
        }
        // A visitor that fails on rank 0: rank 0 gets its error after the last gather and is
        // not visited again; rank 1 (which never fails) is visited throughout; no rank hangs.
        let mut visits = 0;
        let outcome = opt.visit_consolidated_state(&mut |_| {
            visits += 1;
            match comm.rank() {
                0 => Err(tessera_core::Error::checkpoint("disk full")),
                _ => Ok(()),
            }
        });
        match comm.rank() {
            0 => {
                assert!(outcome.unwrap_err().to_string().contains("disk full"));
                assert_eq!(visits, 1);
            }
            _ => {
                outcome.unwrap();
                assert_eq!(visits, parts.len());
            }
        }
    });
}

#[test]
fn a_gathered_save_that_rank_0_cannot_write_fails_on_every_rank_without_a_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = RunDir::open(tmp.path().join("run")).unwrap();
    // Where rank 0 spools and writes is a file, not a folder.
    std::fs::remove_dir_all(dir.checkpoints_dir()).unwrap();
    std::fs::write(dir.checkpoints_dir(), b"not a folder").unwrap();
    let errors = on_ranks(3, |comm| {
        let dev = Cpu::new();
        let comm = comm_of(comm);
        let model = mlp(7, &dev);
        let level = ShardLevel::OptimizerState;
        let mut opt =
            ShardedOptimizer::new(model.parameters(), comm.clone(), level, BUCKET_BYTES, adamw)
                .unwrap();
        mlp_step(&model, &mut opt, 0, &*comm);
        let groups: &[(&str, &dyn Optimizer<Cpu>)] = &[("opt", &opt)];
        let saved = run::save_gathered_checkpoint(
            &dir,
            1,
            &model,
            None,
            groups,
            &config(3),
            &json!({}),
            &*comm,
        );
        saved.unwrap_err().to_string()
    });
    for (rank, error) in errors.iter().enumerate().skip(1) {
        assert!(
            error.contains("rank 0 could not write its part of the checkpoint")
                && error.contains(&format!("rank {rank} stops too")),
            "rank {rank}: {error}"
        );
    }
    assert!(!errors[0].contains("stops too"), "rank 0: {}", errors[0]);
    assert!(!dir.manifest_path(1).exists());
}

/// The parameters after 6 steps at `level` on 2 ranks, with the run saved sharded after 3
/// steps into `dir`.
fn uninterrupted(level: ShardLevel, dir: &Path) -> Vec<u64> {
    on_ranks(2, |comm| {
        let dev = Cpu::new();
        let comm = comm_of(comm);
        let model = mlp(7, &dev);
        let mut opt =
            ShardedOptimizer::new(model.parameters(), comm.clone(), level, BUCKET_BYTES, adamw)
                .unwrap();
        let run_dir = RunDir::open(dir).unwrap();
        for s in 0..6 {
            mlp_step(&model, &mut opt, s, &*comm);
            if s == 2 {
                let groups: &[(&str, &dyn Optimizer<Cpu>)] = &[("opt", &opt)];
                let state = json!({ "step": 3 });
                run::save_sharded_checkpoint(
                    &run_dir,
                    3,
                    &model,
                    groups,
                    &config(2),
                    &state,
                    &*comm,
                )
                .unwrap();
            }
        }
        bits(&model)
    })
    .remove(0)
}

#[test]
fn a_sharded_checkpoint_resumes_on_any_number_of_ranks_bit_for_bit() {
    for level in [ShardLevel::OptimizerState, ShardLevel::Gradients] {
        let tmp = tempfile::tempdir().unwrap();
        let reference = uninterrupted(level, tmp.path());
        for world in [1, 2, 4] {
            let finals = on_ranks(world, |comm| {
                let dev = Cpu::new();
                let comm = comm_of(comm);
                // Another initialisation: the checkpoint must replace it.
                let model = mlp(99, &dev);
                let mut opt = ShardedOptimizer::new(
                    model.parameters(),
                    comm.clone(),
                    level,
                    BUCKET_BYTES,
                    adamw,
                )
                .unwrap();
                let run_dir = RunDir::open(tmp.path()).unwrap();
                let groups: &mut [(&str, &mut dyn Optimizer<Cpu>)] = &mut [("opt", &mut opt)];
                let found = run::resume_allowing(
                    &run_dir,
                    &model,
                    groups,
                    &config(world),
                    &dev,
                    &["world_size"],
                )
                .unwrap()
                .unwrap();
                assert_eq!((found.step, &found.config["world_size"]), (3, &json!(2)));
                for s in 3..6 {
                    mlp_step(&model, &mut opt, s, &*comm);
                }
                bits(&model)
            });
            for (rank, got) in finals.iter().enumerate() {
                assert!(got == &reference, "{level:?}, rank {rank} of {world}");
            }
        }
        // Without leave to differ, another world size is refused by name.
        let dev = Cpu::new();
        let model = mlp(99, &dev);
        let mut opt = adamw(model.parameters()).unwrap();
        let groups: &mut [(&str, &mut dyn Optimizer<Cpu>)] = &mut [("opt", &mut opt)];
        let run_dir = RunDir::open(tmp.path()).unwrap();
        let err = run::resume(&run_dir, &model, groups, &config(1), &dev).unwrap_err();
        assert!(err.to_string().contains("world_size"), "{err}");
        // A plain optimizer takes the sharded checkpoint too (one process, whole state).
        let found =
            run::resume_allowing(&run_dir, &model, groups, &config(1), &dev, &["world_size"])
                .unwrap()
                .unwrap();
        assert_eq!(found.step, 3);
        for s in 3..6 {
            mlp_step(
                &model,
                groups[0].1,
                s,
                &tessera_nn::distributed::LocalCommunicator::new(),
            );
        }
        assert!(
            bits(&model) == reference,
            "{level:?}: a plain AdamW resumed"
        );
    }
}

#[test]
fn a_damaged_rank_file_falls_back_to_the_checkpoint_before() {
    let tmp = tempfile::tempdir().unwrap();
    on_ranks(2, |comm| {
        let dev = Cpu::new();
        let comm = comm_of(comm);
        let model = mlp(7, &dev);
        let mut opt = ShardedOptimizer::new(
            model.parameters(),
            comm.clone(),
            ShardLevel::Gradients,
            BUCKET_BYTES,
            adamw,
        )
        .unwrap();
        let run_dir = RunDir::open(tmp.path()).unwrap();
        for s in 0..2u64 {
            mlp_step(&model, &mut opt, s, &*comm);
            let groups: &[(&str, &dyn Optimizer<Cpu>)] = &[("opt", &opt)];
            let state = json!({ "step": s + 1 });
            run::save_sharded_checkpoint(
                &run_dir,
                s + 1,
                &model,
                groups,
                &config(2),
                &state,
                &*comm,
            )
            .unwrap();
        }
    });
    let run_dir = RunDir::open(tmp.path()).unwrap();
    // Rank 1's file of step 2 loses a byte in the middle (a bit flip would do the same).
    let victim = run_dir.shard_path(2, 1, 2);
    let mut bytes = std::fs::read(&victim).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&victim, bytes).unwrap();
    let dev = Cpu::new();
    let model = mlp(99, &dev);
    let mut opt = adamw(model.parameters()).unwrap();
    let groups: &mut [(&str, &mut dyn Optimizer<Cpu>)] = &mut [("opt", &mut opt)];
    let found = run::resume_allowing(&run_dir, &model, groups, &config(1), &dev, &["world_size"])
        .unwrap()
        .unwrap();
    assert_eq!(found.step, 1);
    assert_eq!(found.skipped.len(), 1);
    assert!(
        found.skipped[0].contains("rank-00001-of-00002"),
        "{:?}",
        found.skipped
    );
    // A missing rank file is skipped the same way.
    std::fs::remove_file(run_dir.shard_path(1, 0, 2)).unwrap();
    let err = run::resume_allowing(&run_dir, &model, groups, &config(1), &dev, &["world_size"])
        .unwrap_err();
    assert!(err.to_string().contains("no checkpoint"), "{err}");
}

mod level_three {
    use super::*;

    fn gpt(seed: u64, dev: &Cpu) -> Gpt<Cpu> {
        GptConfig::new(2, 2, 16, 8, 11)
            .dropout(0.2)
            .dtype(DType::F64)
            .init(dev, &mut Generator::new(seed))
            .unwrap()
    }

    fn gpt_step(
        model: &Gpt<Cpu>,
        optimizer: &mut dyn Optimizer<Cpu>,
        step: u64,
        comm: &dyn Communicator<Cpu>,
    ) {
        let dev = Cpu::new();
        let tokens: Vec<i64> = (0..2 * 9).map(|i| ((i * 7 + step) % 11) as i64).collect();
        let all = Tensor::from_vec(tokens, [2, 9], &dev).unwrap();
        let x = all.narrow(1, 0, 8).unwrap().contiguous().unwrap();
        let y = all.narrow(1, 1, 8).unwrap().contiguous().unwrap();
        optimizer.zero_grad();
        let loss = model.loss(&x, &y).unwrap();
        scaled(loss, comm).backward().unwrap();
        optimizer.step().unwrap();
    }

    /// A level-3 GPT (blocks sharded between uses) on `world` ranks: resumes from `dir` when it
    /// holds a checkpoint, trains to step 4 and saves sharded at step 2, with the blocks
    /// released. Returns rank 0's parameters.
    fn run(world: usize, seed: u64, dir: &Path) -> Vec<u64> {
        on_ranks(world, |comm| {
            let dev = Cpu::new();
            let comm = comm_of(comm);
            let model = gpt(seed, &dev);
            model.train();
            let units = ShardedUnits::new(comm.clone(), model.block_prefixes()).unwrap();
            let mut opt =
                ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
            model.shard_blocks(units.clone()).unwrap();
            let run_dir = RunDir::open(dir).unwrap();
            let groups: &mut [(&str, &mut dyn Optimizer<Cpu>)] = &mut [("opt", &mut opt)];
            let cfg = config(world);
            let start = run::resume_allowing(&run_dir, &model, groups, &cfg, &dev, &["world_size"])
                .unwrap()
                .map_or(0, |found| found.step);
            units.release_all().unwrap();
            for s in start..4 {
                gpt_step(&model, &mut opt, s, &*comm);
                if s + 1 == 2 {
                    let groups: &[(&str, &dyn Optimizer<Cpu>)] = &[("opt", &opt)];
                    let state = json!({});
                    run::save_sharded_checkpoint(&run_dir, 2, &model, groups, &cfg, &state, &*comm)
                        .unwrap();
                }
            }
            units.gather_all().unwrap();
            bits(&model)
        })
        .remove(0)
    }

    #[test]
    fn released_blocks_are_saved_from_their_shares_and_resume_on_other_ranks() {
        let tmp = tempfile::tempdir().unwrap();
        let reference = run(2, 5, &tmp.path().join("a"));
        let saved = tmp.path().join("a");
        for world in [1, 4] {
            let copy = tmp.path().join(format!("resumed-{world}"));
            std::fs::create_dir_all(copy.join("checkpoints")).unwrap();
            for entry in std::fs::read_dir(saved.join("checkpoints")).unwrap() {
                let entry = entry.unwrap();
                std::fs::copy(
                    entry.path(),
                    copy.join("checkpoints").join(entry.file_name()),
                )
                .unwrap();
            }
            assert!(
                run(world, 77, &copy) == reference,
                "resumed on {world} ranks"
            );
        }
    }
}

/// A state in memory that counts the elements read from it.
struct Counting<'a> {
    state: &'a [(String, Tensor<Cpu>)],
    read: std::sync::atomic::AtomicUsize,
}

impl tessera_nn::optim::StateSource<Cpu> for Counting<'_> {
    fn keys(&self) -> Vec<String> {
        self.state.keys()
    }
    fn spec(&self, key: &str) -> Option<(Vec<usize>, DType)> {
        self.state.spec(key)
    }
    fn read(&self, key: &str) -> tessera_core::Result<Tensor<Cpu>> {
        let t = self.state.read(key)?;
        self.read
            .fetch_add(t.numel(), std::sync::atomic::Ordering::SeqCst);
        Ok(t)
    }
    fn read_range(
        &self,
        key: &str,
        offset: usize,
        len: usize,
    ) -> tessera_core::Result<Tensor<Cpu>> {
        self.read
            .fetch_add(len, std::sync::atomic::Ordering::SeqCst);
        let whole = self.state.read(key)?;
        let n = whole.numel();
        whole.reshape([n])?.narrow(0, offset, len)?.contiguous()
    }
}

#[test]
fn a_sharded_optimizer_reads_only_its_share_of_a_state() {
    // A consolidated AdamW state of the MLP after 2 steps, from one plain process.
    let dev = Cpu::new();
    let model = mlp(7, &dev);
    let mut plain = adamw(model.parameters()).unwrap();
    for s in 0..2 {
        mlp_step(
            &model,
            &mut plain,
            s,
            &tessera_nn::distributed::LocalCommunicator::new(),
        );
    }
    let state = plain.state();
    let total: usize = state.iter().map(|(_, t)| t.numel()).sum();
    let reads = on_ranks(4, |comm| {
        let comm = comm_of(comm);
        let model = mlp(7, &Cpu::new());
        let level = ShardLevel::Gradients;
        let make = || {
            ShardedOptimizer::new(model.parameters(), comm.clone(), level, BUCKET_BYTES, adamw)
                .unwrap()
        };
        let (mut opt, mut whole) = (make(), make());
        let source = Counting {
            state: &state,
            read: Default::default(),
        };
        opt.load_state_from(&source).unwrap();
        // The same shares as load_state takes from the whole state.
        whole.load_state(&state).unwrap();
        let bits = |o: &ShardedOptimizer<Cpu, AdamW<Cpu>>| -> Vec<(String, Vec<u64>)> {
            o.state()
                .iter()
                .map(|(k, t)| {
                    let v = t.to_vec_f64().unwrap().into_iter().map(f64::to_bits);
                    (k.clone(), v.collect())
                })
                .collect()
        };
        assert_eq!(bits(&opt), bits(&whole));
        (source.read.into_inner(), opt.state().len())
    });
    for (rank, (read, entries)) in reads.iter().enumerate() {
        assert!(*entries > 0, "rank {rank} loaded nothing");
        // Its shares of the two moments (a quarter, give or take a bucket's rounding) and the
        // step counts.
        assert!(
            read * 4 <= total + 4 * 64,
            "rank {rank} read {read} of {total} elements"
        );
    }
}
