//! Whole-run checkpoints (`tessera_nn::run`): a few checkpoints of a small model with dropout
//! and AdamW, then one kind of damage (a file truncated or with random bytes, a manifest
//! replaced by random bytes, a checkpoint or manifest removed, `latest` pointing nowhere,
//! stale temporaries) or mismatch (another configuration, model width or optimizer group),
//! then `resume` into a fresh model. A typed error must leave the fresh model and optimizer
//! untouched; a success must restore exactly one saved checkpoint, the one it names; nothing
//! may panic. The same for sharded checkpoints (`save_sharded_checkpoint` of a
//! `ShardedOptimizer`, one file per rank and a manifest naming them), with manifests that name
//! the wrong files too, and for one-file checkpoints of a sharded optimizer gathered a bucket
//! at a time (`save_gathered_checkpoint`). Sharded ones are maybe consolidated into one file
//! first (`consolidate_checkpoint`); both are resumed into a plain or a sharded optimizer, or
//! into level 3 a unit at a time (`resume_sharded`). A
//! configuration naming another number of ranks resumes through
//! `resume_allowing(.., ["world_size"])` and is refused otherwise. And `Learner::fit` with odd
//! sizes into a
//! run folder: typed errors or a report of exactly the epochs and steps asked for.

use super::files::make_bytes;
use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome};
use crate::rng::Rng;
use serde_json::json;
use tessera_autograd::Var;
use tessera_core::{DType, Generator, Tensor};
use tessera_nn::distributed::{
    Communicator, LocalCommunicator, ShardLevel, ShardedOptimizer, ShardedUnits,
};
use tessera_nn::layers::{Dropout, DropoutConfig, Linear, LinearConfig, Sequential};
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::run::{
    consolidate_checkpoint, resume_allowing, resume_sharded, save_checkpoint,
    save_gathered_checkpoint, save_sharded_checkpoint, Manifest, RunDir,
};
use tessera_nn::{Forward, Module};

type Model<B> = Sequential<(Linear<B>, Dropout, Linear<B>)>;

fn model<B: FuzzBackend>(width: usize, seed: u64, b: &B) -> tessera_core::Result<Model<B>> {
    let mut g = Generator::new(seed);
    Ok(Sequential::new((
        LinearConfig::new(3, width).init(b, &mut g)?,
        DropoutConfig::new().p(0.25).init(&mut g)?,
        LinearConfig::new(width, 2).init(b, &mut g)?,
    )))
}

/// Every bit of a model and its optimizer, by name.
type Fingerprint = Vec<(String, Vec<u64>)>;

/// Every bit of the model's tensors, its random streams and the optimizer's state.
fn fingerprint<B: FuzzBackend>(m: &Model<B>, o: &dyn Optimizer<B>) -> Fingerprint {
    let bits = |t: &Tensor<B>| {
        t.to_vec_f64()
            .map(|v| v.iter().map(|x| x.to_bits()).collect())
            .unwrap_or_default()
    };
    let mut out: Fingerprint = m
        .state_dict()
        .iter()
        .map(|(n, t)| (n.clone(), bits(t)))
        .collect();
    out.extend(
        o.state()
            .iter()
            .map(|(n, t)| (format!("optim.{n}"), bits(t))),
    );
    m.visit_random_streams("", &mut |name, s| {
        let (seed, offset) = s.get().advance(0);
        out.push((format!("rng.{name}"), vec![seed, offset]));
    });
    // By name: a sharded optimizer lists its consolidated state in bucket order.
    out.sort();
    out
}

/// One training step on a fixed batch (moves parameters, moments and the dropout stream).
fn step<B: FuzzBackend>(m: &Model<B>, o: &mut dyn Optimizer<B>, b: &B) -> tessera_core::Result<()> {
    let x = Tensor::randn([4, 3], DType::F32, 11, b)?;
    let loss = m.forward(&Var::constant(x))?.square()?.mean_all()?;
    o.zero_grad();
    loss.backward()?;
    o.step()
}

/// How the checkpoints of [`damaged_resume`] are written.
#[derive(Clone, Copy, PartialEq)]
enum Saved {
    /// `save_checkpoint` of a plain AdamW.
    OneFile,
    /// `save_sharded_checkpoint` of a `ShardedOptimizer`: a file per rank and a manifest.
    Sharded,
    /// `save_gathered_checkpoint` of a `ShardedOptimizer`: one file, gathered a bucket at a time.
    Gathered,
}

/// Saves checkpoints after steps 1..=`count` into a fresh folder as `saved` says, damages it
/// as `damage` says, resumes, and checks the outcome.
fn damaged_resume<B: FuzzBackend>(c: &Ctx<'_, B>, saved: Saved) -> Outcome<B> {
    let sharded = saved == Saved::Sharded;
    let kinds = if sharded { 13 } else { 11 };
    let (count, damage) = (1 + c.size(0) % 3, c.size(1) % kinds);
    let mut rng = Rng::new(c.seed(3));
    let dir = c.dir().join(format!("run-{}", rng.next_u64() % 1_000_000));
    // Fresh: an earlier step drawing the same seed (an edge value, say) used the same name,
    // and its newer checkpoints would be resumed.
    let _ = std::fs::remove_dir_all(&dir);
    let outcome = damaged_resume_in(c, &dir, count, damage, saved, &mut rng);
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

/// [`damaged_resume`] in the fresh folder `dir`.
fn damaged_resume_in<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    dir: &std::path::Path,
    count: usize,
    damage: usize,
    saved_as: Saved,
    rng: &mut Rng,
) -> Outcome<B> {
    let sharded = saved_as == Saved::Sharded;
    let b = c.backend();
    let config = json!({"model": "fuzz", "lr": 0.01, "world_size": 1});
    let setup = || -> tessera_core::Result<(RunDir, Vec<Fingerprint>)> {
        let run = RunDir::open(dir)?.keep_last(2);
        let m = model(4, 1, b)?;
        let adamw = |params| AdamW::new(params, AdamWConfig::new(0.01));
        let mut saved = Vec::new();
        if saved_as != Saved::OneFile {
            // One rank, small buckets: its file holds pieces of every parameter and moment.
            let comm = std::sync::Arc::new(LocalCommunicator::new());
            let level = ShardLevel::Gradients;
            let mut o = ShardedOptimizer::new(m.parameters(), comm.clone(), level, 40, adamw)?;
            for s in 1..=count as u64 {
                step(&m, &mut o, b)?;
                let state = json!({"s": s});
                let groups: &[(&str, &dyn Optimizer<B>)] = &[("adamw", &o)];
                match saved_as {
                    Saved::Sharded => {
                        save_sharded_checkpoint(&run, s, &m, groups, &config, &state, &*comm)?
                    }
                    _ => save_gathered_checkpoint(
                        &run, s, &m, None, groups, &config, &state, &*comm,
                    )?,
                };
                // The consolidated state: what a plain AdamW holds after the resume.
                o.prepare_checkpoint()?;
                saved.push(fingerprint(&m, &o));
                o.finish_checkpoint();
            }
        } else {
            let mut o = adamw(m.parameters())?;
            for s in 1..=count as u64 {
                step(&m, &mut o, b)?;
                save_checkpoint(&run, s, &m, &[("adamw", &o)], &config, &json!({"s": s}))?;
                saved.push(fingerprint(&m, &o));
            }
        }
        Ok((run, saved))
    };
    let (run, saved) = match setup() {
        Ok(v) => v,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    let newest = count as u64;
    let file = match sharded {
        true => run.shard_path(newest, 0, 1),
        false => run.checkpoint_path(newest),
    };
    // A manifest of the newest checkpoint that names other files.
    let misnamed = |files: &dyn Fn(&mut Manifest)| -> std::io::Result<()> {
        let path = run.manifest_path(newest);
        let mut manifest = Manifest::read(&path).map_err(std::io::Error::other)?;
        files(&mut manifest);
        let text = serde_json::to_vec(&manifest).map_err(std::io::Error::other)?;
        std::fs::write(path, text)
    };
    let (mut width, mut group, mut resume_config) = (4, "adamw", config.clone());
    let damaged = (|| -> std::io::Result<()> {
        match damage {
            0 => {}
            1 => {
                let bytes = std::fs::read(&file)?;
                std::fs::write(&file, &bytes[..rng.below(bytes.len() + 1)])?;
            }
            2 => std::fs::write(&file, make_bytes(c.bytes(2)))?,
            3 => std::fs::write(run.manifest_path(newest), make_bytes(c.bytes(2)))?,
            4 => std::fs::remove_file(&file)?,
            5 => std::fs::remove_file(run.manifest_path(newest))?,
            6 => std::fs::write(run.checkpoints_dir().join("latest"), b"step-999999999999")?,
            7 => resume_config = json!({"model": "fuzz", "lr": 0.02, "world_size": 1}),
            8 => width = 5,
            9 => group = "decay",
            // Another number of ranks: resumed where that may differ, refused otherwise.
            10 => resume_config = json!({"model": "fuzz", "lr": 0.01, "world_size": 3}),
            // Sharded only: a second rank whose file is rank 0's, then a file outside the
            // folder.
            11 => misnamed(&|m| {
                let first = m.shards[0].clone();
                m.shards.push(first);
            })?,
            _ => misnamed(&|m| m.shards[0].file = "../../escape.safetensors".into())?,
        }
        Ok(())
    })();
    if let Err(e) = damaged {
        return Outcome::Err(e.to_string());
    }
    // Every other time, a sharded checkpoint (maybe a damaged one, maybe a step never saved) is
    // consolidated into one file first: resuming must then find what it would have found.
    if sharded && rng.below(2) == 0 {
        let at = 1 + rng.below(count + 1) as u64;
        if consolidate_checkpoint(&run, at, b).is_ok() {
            let left = run.shard_path(at, 0, 1);
            if left.exists() {
                return Outcome::Break(format!(
                    "step {at} was consolidated but its rank file {} is still there",
                    left.display()
                ));
            }
            match Manifest::read(&run.manifest_path(at)) {
                Ok(m) if m.is_sharded() => {
                    return Outcome::Break(format!(
                        "step {at} was consolidated but its manifest still names rank files"
                    ))
                }
                Ok(_) => {}
                Err(e) => {
                    return Outcome::Break(format!("step {at} consolidated, manifest lost: {e}"))
                }
            }
        }
    }
    // Resuming where the number of ranks may differ, or (every other time) nothing may.
    let allow_world = rng.below(2) == 0;
    // A sharded checkpoint is resumed into a plain AdamW or (every other time) a sharded one,
    // which reads only its shares.
    let into_sharded = saved_as != Saved::OneFile && rng.below(2) == 0;
    // Or (any checkpoint, one time in three) into level 3 with both linear layers as units,
    // through `resume_sharded`, which reads them a unit at a time.
    let into_units = !into_sharded && rng.below(3) == 0;
    let made = model(width, 99, b).and_then(|m| {
        let adamw = |params| AdamW::new(params, AdamWConfig::new(0.01));
        let comm: std::sync::Arc<dyn Communicator<B>> =
            std::sync::Arc::new(LocalCommunicator::new());
        let mut units = None;
        let o: Box<dyn Optimizer<B>> = match (into_sharded, into_units) {
            (true, _) => {
                let level = ShardLevel::OptimizerState;
                Box::new(ShardedOptimizer::new(
                    m.parameters(),
                    comm,
                    level,
                    24,
                    adamw,
                )?)
            }
            (false, true) => {
                let made = ShardedUnits::new(comm, vec!["0".into(), "2".into()])?;
                let o = ShardedOptimizer::with_units(m.parameters(), &made, 24, adamw)?;
                units = Some(made);
                Box::new(o)
            }
            (false, false) => Box::new(adamw(m.parameters())?),
        };
        Ok((m, o, units))
    });
    let (fresh, mut fresh_opt, units) = match made {
        Ok(v) => v,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    let before = fingerprint(&fresh, &*fresh_opt);
    let may_differ: &[&str] = if allow_world { &["world_size"] } else { &[] };
    let groups: &mut [(&str, &mut dyn Optimizer<B>)] = &mut [(group, &mut *fresh_opt)];
    let outcome = match &units {
        Some(units) => resume_sharded(&run, &fresh, units, groups, &resume_config, b, may_differ),
        None => resume_allowing(&run, &fresh, groups, &resume_config, b, may_differ),
    };
    if let (Some(units), Ok(Some(_))) = (&units, &outcome) {
        // Restored as shares: whole again to compare.
        if units.is_held() {
            return Outcome::Break("resume_sharded left the units held".into());
        }
        if let Err(e) = units.gather_all() {
            return Outcome::Break(format!("units not gathered after a resume: {e}"));
        }
    }
    if let Ok(Some(found)) = &outcome {
        if found.config != config {
            return Outcome::Break(format!(
                "resumed step {} reports configuration {} where {config} was saved",
                found.step, found.config
            ));
        }
    }
    let mut after = fingerprint(&fresh, &*fresh_opt);
    if outcome.as_ref().is_ok_and(Option::is_some) && (into_sharded || into_units) {
        // The consolidated state, as the saved fingerprints hold it.
        if let Err(e) = fresh_opt.prepare_checkpoint() {
            return Outcome::Break(format!("no consolidated state after a resume: {e}"));
        }
        after = fingerprint(&fresh, &*fresh_opt);
    }
    match outcome {
        Err(e) if after != before => Outcome::Break(format!(
            "resume failed ({e}) but changed the model or optimizer (damage {damage})"
        )),
        Err(e) => Outcome::Err(e.to_string()),
        // Only when no manifest is left (a checkpoint without one is not a checkpoint).
        Ok(None) if run.steps().is_ok_and(|s| s.is_empty()) => Outcome::Ok(Vec::new()),
        Ok(None) => Outcome::Break(format!("no checkpoint found after {count} saves")),
        Ok(Some(found)) if (7..=9).contains(&damage) || (damage == 10 && !allow_world) => {
            Outcome::Break(format!(
                "resumed step {} despite a mismatch (damage {damage})",
                found.step
            ))
        }
        Ok(Some(found)) if damage >= 11 && found.step == newest => Outcome::Break(format!(
            "resumed step {} through a manifest naming the wrong files (damage {damage})",
            found.step
        )),
        Ok(Some(found)) => {
            let index = (found.step as usize).wrapping_sub(1);
            match saved.get(index) {
                Some(want) if *want == after => Outcome::Ok(Vec::new()),
                Some(want) => {
                    let differing: Vec<&str> = want
                        .iter()
                        .zip(&after)
                        .filter(|(w, a)| w != a)
                        .map(|(w, _)| w.0.as_str())
                        .collect();
                    Outcome::Break(format!(
                        "resumed step {} (damage {damage}) but the model is not that \
                         checkpoint's: {differing:?} differ ({} vs {} entries)",
                        found.step,
                        want.len(),
                        after.len()
                    ))
                }
                None => Outcome::Break(format!("resumed a step never saved: {}", found.step)),
            }
        }
    }
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op(
            "run checkpoints: damage, then resume",
            3,
            &[SIZE, SIZE, BYTES, SEED],
            NONE,
            |c| Ok(damaged_resume(c, Saved::OneFile)),
        )
        .work(|_| Ok(1 << 14)),
        op(
            "sharded run checkpoints: damage, then resume into a plain optimizer",
            3,
            &[SIZE, SIZE, BYTES, SEED],
            NONE,
            |c| Ok(damaged_resume(c, Saved::Sharded)),
        )
        .work(|_| Ok(1 << 14)),
        op(
            "one-file run checkpoints gathered a bucket at a time: damage, then resume",
            3,
            &[SIZE, SIZE, BYTES, SEED],
            NONE,
            |c| Ok(damaged_resume(c, Saved::Gathered)),
        )
        .work(|_| Ok(1 << 14)),
        op(
            "Learner::fit (odd sizes, a run folder, maybe resuming)",
            2,
            &[SIZE, SIZE, SIZE, SIZE, B, SEED],
            NONE,
            |c| Ok(learner_fit(c)),
        )
        .work(|_| Ok(1 << 15)),
    ]
}

/// `n` items of 3 features, 2 classes.
#[derive(Clone)]
struct Items(usize);

impl tessera_nn::data::Dataset for Items {
    fn len(&self) -> usize {
        self.0
    }
    fn item_dims(&self) -> &[usize] {
        &[3]
    }
    fn fill_batch(
        &self,
        at: &[usize],
        x: &mut Vec<f32>,
        y: &mut Vec<i64>,
    ) -> tessera_core::Result<()> {
        if let Some(&bad) = at.iter().find(|&&i| i >= self.0) {
            return Err(tessera_core::Error::InvalidArgument {
                op: "Items",
                msg: format!("no item {bad}"),
            });
        }
        for &i in at {
            x.extend([i as f32 / 7.0, 1.0 - i as f32 / 5.0, 0.5]);
            y.push((i % 2) as i64);
        }
        Ok(())
    }
}

/// `Learner::fit` with odd sizes (no items, a batch of 0, 0 epochs, logging every 0 steps),
/// into a run folder, possibly resuming what an earlier step of the program left there.
fn learner_fit<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    use tessera_nn::data::{DataLoader, LoaderConfig};
    use tessera_nn::training::Learner;
    let b = c.backend();
    let (items, batch, epochs, log_every) =
        (c.size(0) % 40, c.size(1) % 9, c.size(2) % 3, c.size(3) % 4);
    let result = (|| -> tessera_core::Result<(usize, tessera_nn::training::FitReport)> {
        let train = DataLoader::new(Items(items), LoaderConfig::new(batch).shuffled(1))?;
        let test = DataLoader::new(Items(items), LoaderConfig::new(batch).sequential())?;
        let m = model(4, c.seed(5), b)?;
        let o = AdamW::new(m.parameters(), AdamWConfig::new(0.01))?;
        let dir = RunDir::open(c.dir().join("learner-run"))?;
        let config = json!({"items": items, "batch": batch, "epochs": epochs});
        let mut learner = Learner::new(m, o)
            .epochs(epochs)
            .log_every(log_every)
            .log_dir(c.dir().join("learner-logs"))
            .run_dir(dir, config, Some(2), c.flag(4));
        let steps = train.batches_for(items);
        learner.fit(&train, &test, b).map(|r| (steps, r))
    })();
    match result {
        Err(e) => Outcome::Err(e.to_string()),
        Ok((_, report)) if report.epochs.len() != epochs => Outcome::Break(format!(
            "fit of {epochs} epochs reported {}",
            report.epochs.len()
        )),
        Ok((steps, report)) if report.global_step != epochs * steps => Outcome::Break(format!(
            "{epochs} epochs of {steps} steps reported {} steps",
            report.global_step
        )),
        Ok(_) => Outcome::Ok(Vec::new()),
    }
}
