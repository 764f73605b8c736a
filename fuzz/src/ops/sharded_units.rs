//! Sharding level 3 for the reference models (`ReferenceModel::shard_layers`, one rank) and
//! for Llama (`Llama::shard_layers`): a
//! model whose layers run as sharded units must refuse units that do not match its layers, and
//! otherwise compute what the plain model computes: the same loss (or the same kind of
//! failure) and, after training steps, the same parameters bit for bit, with or without the
//! units' gathers prefetched (`ShardedUnits::set_prefetch`); a GPT's cached decode through its
//! released blocks gives the plain GPT's logits. The same for a whole
//! `Learner::fit` at level 3 (`Learner::sharded_units`, maybe with sharded checkpoints in a run
//! folder) against the plain learner: the same epochs' figures and parameters, or both failing.

use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome};
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{DType, Result, Tensor};
use tessera_nn::distributed::{Communicator, LocalCommunicator, ShardedOptimizer, ShardedUnits};
use tessera_nn::loss::cross_entropy;
use tessera_nn::models::{ModelKind, ReferenceModel};
use tessera_nn::optim::{Optimizer, Sgd, SgdConfig};
use tessera_nn::run::save_gathered_model;
use tessera_nn::{Forward, Module};

/// Every bit of a model's parameters.
fn bits<B: FuzzBackend>(model: &ReferenceModel<B>) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for (_, v) in model.parameters() {
        out.extend(v.value().to_vec_f64()?.into_iter().map(f64::to_bits));
    }
    Ok(out)
}

/// One SGD step of `model` on `(x, y)`: the loss, or the step's error.
fn train_step<B: FuzzBackend>(
    model: &ReferenceModel<B>,
    optimizer: &mut dyn Optimizer<B>,
    x: &Tensor<B>,
    y: &Tensor<B>,
) -> Result<f64> {
    let loss = cross_entropy(&model.forward(&Var::constant(x.clone()))?, y)?;
    optimizer.zero_grad();
    loss.backward()?;
    optimizer.step()?;
    loss.value().to_scalar_f64()
}

/// The plain and the level-3 step's outcomes, then both models' parameter bits.
type BothSteps = (Result<f64>, Result<f64>, Vec<u64>, Vec<u64>);

fn level_three<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    level_three_with(c, Between::Nothing)
}

/// What [`level_three_with`] does with the level-3 model between its two steps.
#[derive(Clone, Copy)]
enum Between {
    Nothing,
    /// `ShardedUnits::hold_on(root)`, then the release.
    HoldOn(usize),
    /// `run::save_gathered_model` of the released units (into a folder that exists, or not).
    SaveGathered {
        folder_exists: bool,
    },
}

/// [`level_three`], the units held on rank `c.size(6) % 2` between the two steps
/// (`ShardedUnits::hold_on`; rank 1 is outside the one-rank world, a typed error): held, the
/// model must be the plain one's; what is written into it meanwhile is dropped at the release.
fn level_three_held_on_one_rank<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    level_three_with(c, Between::HoldOn(c.size(6) % 2))
}

/// [`level_three`], the released model written between the two steps with
/// `run::save_gathered_model` (the units gathered a unit at a time): the file must hold what
/// `Module::save` of the plain model writes, or (no folder) be a typed error.
fn level_three_saved_gathered<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    level_three_with(
        c,
        Between::SaveGathered {
            folder_exists: c.size(6) % 4 != 0,
        },
    )
}

/// A level-3 MLP's two steps against the plain one's, with `between` done between them.
fn level_three_with<B: FuzzBackend>(c: &Ctx<'_, B>, between: Between) -> Outcome<B> {
    let b = c.backend();
    let (batch, units_change, width) = (c.size(0) % 5, c.size(1) % 4, c.size(2) % 3);
    let (seed, label_range) = (c.seed(3), 9 + c.size(4) % 3);
    let prefetch = c.flag(5);
    let setup = || -> Result<_> {
        let plain = ModelKind::Mlp.build(DType::F32, seed, b)?;
        let model = ModelKind::Mlp.build(DType::F32, seed, b)?;
        let comm: Arc<dyn Communicator<B>> = Arc::new(LocalCommunicator::new());
        let prefixes = with_units_changed(model.unit_prefixes(), units_change, "9");
        let units = ShardedUnits::new(comm, prefixes)?;
        units.set_prefetch(prefetch);
        Ok((plain, model, units))
    };
    let (plain, model, units) = match setup() {
        Ok(v) => v,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    let model = match (model.shard_layers(units.clone()), units_change) {
        (Err(e), 1 | 2) => return Outcome::Err(e.to_string()),
        (Ok(_), 1 | 2) => {
            return Outcome::Break(format!(
                "shard_layers accepted {} units for the MLP's 3 layers",
                units.len()
            ))
        }
        (Err(e), _) => return Outcome::Break(format!("shard_layers refused its own units: {e}")),
        (Ok(m), _) => m,
    };
    let run = || -> Result<BothSteps> {
        let config = SgdConfig::new(0.1).momentum(0.9);
        let mut plain_opt = Sgd::new(plain.parameters(), config)?;
        let mut sharded = ShardedOptimizer::with_units(model.parameters(), &units, 4096, |s| {
            Sgd::new(s, config)
        })?;
        units.release_all()?;
        // Inputs of 784 features, or (width 1, 2) of a width the first layer refuses.
        let features = [784, 783, 785][width];
        let x = Tensor::randn([batch, features], DType::F32, seed, b)?;
        let labels: Vec<i64> = (0..batch).map(|i| (i * 7 % label_range) as i64).collect();
        let y = Tensor::from_vec(labels, [batch], b)?;
        // Two steps: the second's forward pass follows the order the first one taught.
        let plain_first = train_step(&plain, &mut plain_opt, &x, &y);
        let plain_after_first = bits(&plain)?;
        // What `Module::save` of the plain model writes after its first step.
        let plain_after_first_file = match between {
            Between::SaveGathered { .. } => {
                let path = c.dir().join(format!("level3-plain-{seed}.safetensors"));
                plain.save(&path)?;
                Some(file_tensors(&path, b)?)
            }
            _ => None,
        };
        let want = plain_first.and_then(|_| train_step(&plain, &mut plain_opt, &x, &y));
        let first = train_step(&model, &mut sharded, &x, &y);
        if let (Between::SaveGathered { folder_exists }, Ok(_)) = (between, &first) {
            let folder = c.dir().join(format!("level3-file-{seed}"));
            let _ = std::fs::remove_dir_all(&folder);
            if folder_exists {
                std::fs::create_dir_all(&folder)
                    .map_err(|e| tessera_core::Error::io(&folder, e))?;
            }
            let path = folder.join("model.safetensors");
            let comm = units.communicator().clone();
            let no_metadata = Default::default();
            save_gathered_model(&path, &model, Some(&*units), &no_metadata, &*comm)?;
            if units.is_held() {
                return Err(broke("save_gathered_model left the units held"));
            }
            let want = plain_after_first_file
                .as_ref()
                .expect("saved with SaveGathered");
            let same = file_tensors(&path, b)? == *want;
            if !same {
                return Err(broke(
                    "save_gathered_model wrote other tensors than the plain model's Module::save",
                ));
            }
        }
        if let (Between::HoldOn(root), Ok(_)) = (between, &first) {
            units.hold_on(root)?;
            let held = bits(&model)?;
            // Written while held on one rank: dropped at the release.
            for (name, var) in model.parameters() {
                if units.unit_of(&name).is_some() {
                    var.set_value(var.value().zeros_like()?)?;
                }
            }
            units.release_all()?;
            if held != plain_after_first {
                return Err(broke(
                    "ShardedUnits::hold_on held other parameters than the plain model's",
                ));
            }
        }
        let got = first.and_then(|_| train_step(&model, &mut sharded, &x, &y));
        units.gather_all()?;
        Ok((want, got, bits(&plain)?, bits(&model)?))
    };
    verdict("MLP", run())
}

/// Marks an error of [`level_three_with`] that is a broken invariant, not a typed failure.
const BROKE: &str = "fuzz invariant broken: ";

/// An error [`verdict`] turns into a break.
fn broke(what: &str) -> tessera_core::Error {
    tessera_core::Error::InvalidArgument {
        op: "fuzz",
        msg: format!("{BROKE}{what}"),
    }
}

/// Unit prefixes as given (`change` 0 or 3), one short (1), or with `extra` added (2).
fn with_units_changed(mut prefixes: Vec<String>, change: usize, extra: &str) -> Vec<String> {
    match change {
        1 => {
            prefixes.pop();
        }
        2 => prefixes.push(extra.into()),
        _ => {}
    }
    prefixes
}

/// The outcome of a plain and a level-3 step of `model`: equal losses and parameter bits, or
/// both failing; anything else breaks.
fn verdict<B: FuzzBackend>(model: &str, steps: Result<BothSteps>) -> Outcome<B> {
    match steps {
        Err(e) if e.to_string().contains(BROKE) => Outcome::Break(e.to_string()),
        Err(e) => Outcome::Err(e.to_string()),
        Ok((Ok(want), Ok(got), a, b)) if want.to_bits() != got.to_bits() || a != b => {
            Outcome::Break(format!(
                "level 3 computed loss {got} where the plain {model} computed {want}, or other \
                 parameters after the step"
            ))
        }
        Ok((Ok(_), Ok(_), _, _)) => Outcome::Ok(Vec::new()),
        Ok((Err(_), Err(e), _, _)) => Outcome::Err(e.to_string()),
        Ok((want, got, _, _)) => Outcome::Break(format!(
            "the plain {model} gave {want:?}, level 3 gave {got:?}"
        )),
    }
}

/// A Llama step at level 3 (`Llama::shard_layers`, one rank) against the plain model's: a
/// small Llama of drawn sizes (grouped-query attention, maybe a tied head, any precision),
/// units that may not match its layers (refused by name), token ids that may leave the
/// vocabulary (both fail). Same loss and parameters bit for bit after an AdamW step.
fn llama_level_three<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    use tessera_nn::llama::{Llama, LlamaConfig};
    use tessera_nn::optim::{AdamW, AdamWConfig};
    use tessera_nn::precision::Precision;
    let b = c.backend();
    let s = |i: usize| c.size(i);
    let kv = s(0) % 2 + 1;
    let heads = kv * (s(1) % 2 + 1);
    let d = 2 * (s(2) % 3 + 1);
    let (vocab, layers, t) = (s(3) % 20 + 1, s(4) % 3 + 1, s(5) % 6 + 1);
    let units_change = s(6) % 4;
    let seed = c.seed(7);
    let config = LlamaConfig::new(vocab, heads * d, s(8) % 12 + 1, layers, heads, kv, 8)
        .precision(Precision::ALL[s(9) % 3])
        .tie_word_embeddings(c.flag(10));
    let setup = || -> Result<_> {
        let plain = config.init(b, &mut tessera_core::Generator::new(seed))?;
        let model = config.init(b, &mut tessera_core::Generator::new(seed))?;
        let comm: Arc<dyn Communicator<B>> = Arc::new(LocalCommunicator::new());
        let prefixes = with_units_changed(model.layer_prefixes(), units_change, "model.layers.99");
        let units = ShardedUnits::new(comm, prefixes)?;
        units.set_prefetch(c.flag(12));
        Ok((plain, model, units))
    };
    let (plain, model, units) = match setup() {
        Ok(v) => v,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    match (model.shard_layers(units.clone()), units_change) {
        (Err(e), 1 | 2) => return Outcome::Err(e.to_string()),
        (Ok(_), 1 | 2) => {
            return Outcome::Break(format!(
                "shard_layers accepted {} units for {layers} layers",
                units.len()
            ))
        }
        (Err(e), _) => return Outcome::Break(format!("shard_layers refused its own units: {e}")),
        (Ok(()), _) => {}
    }
    let step = |m: &Llama<B>, opt: &mut dyn Optimizer<B>, x: &Tensor<B>, y: &Tensor<B>| {
        let loss = m.loss(x, y)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        loss.value().to_scalar_f64()
    };
    let llama_bits = |m: &Llama<B>| -> Result<Vec<u64>> {
        let mut out = Vec::new();
        for (_, v) in m.parameters() {
            out.extend(v.value().to_vec_f64()?.into_iter().map(f64::to_bits));
        }
        Ok(out)
    };
    let run = || -> Result<BothSteps> {
        let config = AdamWConfig::new(0.01);
        let mut plain_opt = AdamW::new(plain.parameters(), config)?;
        let mut sharded = ShardedOptimizer::with_units(model.parameters(), &units, 4096, |s| {
            AdamW::new(s, config)
        })?;
        units.release_all()?;
        // Now and then one id past the vocabulary.
        let past = c.flag(11) as usize;
        let ids: Vec<i64> = (0..2 * t)
            .map(|i| ((i * 7 + seed as usize % 5) % (vocab + past)) as i64)
            .collect();
        let x = Tensor::from_vec(ids.clone(), [2, t], b)?;
        let y = Tensor::from_vec(ids.into_iter().rev().collect(), [2, t], b)?;
        let want =
            step(&plain, &mut plain_opt, &x, &y).and_then(|_| step(&plain, &mut plain_opt, &x, &y));
        let got =
            step(&model, &mut sharded, &x, &y).and_then(|_| step(&model, &mut sharded, &x, &y));
        units.gather_all()?;
        Ok((want, got, llama_bits(&plain)?, llama_bits(&model)?))
    };
    verdict(&format!("Llama ({config:?})"), run())
}

/// `n` images of 784 pixels, labels of 10 classes.
#[derive(Clone)]
struct Pixels(usize);

impl tessera_nn::data::Dataset for Pixels {
    fn len(&self) -> usize {
        self.0
    }
    fn item_dims(&self) -> &[usize] {
        &[784]
    }
    fn fill_batch(&self, at: &[usize], x: &mut Vec<f32>, y: &mut Vec<i64>) -> Result<()> {
        for &i in at {
            x.extend((0..784).map(|p| ((i * 31 + p * 7) % 97) as f32 / 97.0));
            y.push((i % 10) as i64);
        }
        Ok(())
    }
}

/// What a fit left: its epochs' figures (throughput zeroed) and the model's parameter bits.
type Fitted = (Vec<tessera_nn::training::EpochReport>, Vec<u64>);

/// `Learner::fit` of the plain MLP, and of the same MLP at level 3 on one rank (its layers as
/// units, a sharded optimizer, maybe a run folder of sharded checkpoints).
fn learner_level_three<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    use tessera_nn::data::{DataLoader, LoaderConfig};
    use tessera_nn::run::RunDir;
    use tessera_nn::training::Learner;
    let b = c.backend();
    let (items, batch, epochs) = (c.size(0) % 12, c.size(1) % 5, 1 + c.size(2) % 2);
    let (seed, with_run_dir) = (c.seed(3), c.flag(4));
    let config = SgdConfig::new(0.05).momentum(0.9);
    let loaders = || -> Result<_> {
        let train = DataLoader::new(Pixels(items), LoaderConfig::new(batch).shuffled(seed))?;
        let test = DataLoader::new(Pixels(items / 2), LoaderConfig::new(batch).sequential())?;
        Ok((train, test))
    };
    let fitted = |mut report: tessera_nn::training::FitReport, model: &ReferenceModel<B>| {
        for epoch in &mut report.epochs {
            epoch.samples_per_s = 0.0;
        }
        bits(model).map(|bits| (report.epochs, bits))
    };
    let plain = || -> Result<Fitted> {
        let (train, test) = loaders()?;
        let model = ModelKind::Mlp.build(DType::F32, seed, b)?;
        let optimizer = Sgd::new(model.parameters(), config)?;
        let mut learner = Learner::new(model, optimizer).epochs(epochs);
        let report = learner.fit(&train, &test, b)?;
        fitted(report, learner.model())
    };
    let sharded = || -> Result<Fitted> {
        let (train, test) = loaders()?;
        let model = ModelKind::Mlp.build(DType::F32, seed, b)?;
        let comm: Arc<dyn Communicator<B>> = Arc::new(LocalCommunicator::new());
        let units = ShardedUnits::new(comm.clone(), model.unit_prefixes())?;
        let model = model.shard_layers(units.clone())?;
        let optimizer = ShardedOptimizer::with_units(model.parameters(), &units, 4096, |s| {
            Sgd::new(s, config)
        })?;
        let mut learner = Learner::new(model, optimizer)
            .epochs(epochs)
            .communicator(comm)
            .sharded_units(units.clone());
        if with_run_dir {
            let dir = c.dir().join(format!("level3-run-{seed}"));
            let _ = std::fs::remove_dir_all(&dir);
            let run_config = serde_json::json!({"items": items, "batch": batch});
            learner = learner
                .run_dir(RunDir::open(&dir)?, run_config, Some(1), false)
                .sharded_checkpoints();
        }
        let report = learner.fit(&train, &test, b)?;
        // Released on return, as in training: no rank holds the model whole.
        if units.is_held() {
            return Err(tessera_core::Error::InvalidArgument {
                op: "fuzz",
                msg: format!("{BROKE}Learner::fit returned with the units held"),
            });
        }
        units.gather_all()?;
        fitted(report, learner.model())
    };
    match (plain(), sharded()) {
        (Ok(want), Ok(got)) if want != got => Outcome::Break(format!(
            "Learner::fit at level 3 gave epochs {:?} (or other parameters) where the plain \
             learner gave {:?}",
            got.0, want.0
        )),
        (_, Err(e)) if e.to_string().contains(BROKE) => Outcome::Break(e.to_string()),
        (Ok(_), Ok(_)) => Outcome::Ok(Vec::new()),
        (Err(_), Err(e)) => Outcome::Err(e.to_string()),
        (want, got) => Outcome::Break(format!(
            "the plain learner gave {:?}, level 3 gave {:?}",
            want.map(|w| w.0),
            got.map(|g| g.0)
        )),
    }
}

/// Every tensor of a safetensors file by name: dims and bits.
type FileTensors = Vec<(String, Vec<usize>, Vec<u64>)>;

fn file_tensors<B: FuzzBackend>(path: &std::path::Path, b: &B) -> Result<FileTensors> {
    let file = tessera_nn::checkpoint::load(path, b)?;
    let mut out = Vec::new();
    for (name, t) in &file.tensors {
        let bits = t.to_vec_f64()?.into_iter().map(f64::to_bits).collect();
        out.push((name.clone(), t.dims().to_vec(), bits));
    }
    Ok(out)
}

/// `gpt::save_checkpoint_gathered` of a GPT whose blocks are released level-3 units (one
/// rank), against `gpt::save_checkpoint` of the same model held whole: the same weights, bit
/// for bit, and the same vocabulary and configuration files; a tokenizer whose vocabulary is
/// not the model's (drawn now and then) fails both.
fn gpt_saved_gathered<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    use tessera_nn::data::CharTokenizer;
    use tessera_nn::gpt::{save_checkpoint, save_checkpoint_gathered, MODEL_FILE};
    let b = c.backend();
    let config = super::transformer::gpt_config(c, 0);
    let seed = c.seed(7);
    let vocab = config
        .vocab_size
        .saturating_add(usize::from(c.size(8) % 4 == 0));
    let run = || -> Result<(Result<()>, Result<()>, std::path::PathBuf, std::path::PathBuf)> {
        let model = config.init(b, &mut tessera_core::Generator::new(seed))?;
        let comm: Arc<dyn Communicator<B>> = Arc::new(LocalCommunicator::new());
        let units = ShardedUnits::new(comm.clone(), model.block_prefixes())?;
        let _optimizer = ShardedOptimizer::with_units(model.parameters(), &units, 4096, |s| {
            Sgd::new(s, SgdConfig::new(0.1))
        })?;
        model.shard_blocks(units.clone())?;
        let chars = (0..vocab).map(|i| char::from_u32(0x100 + i as u32));
        let tokenizer = CharTokenizer::from_chars(chars.collect::<Option<Vec<char>>>().ok_or(
            tessera_core::Error::InvalidArgument {
                op: "fuzz",
                msg: "no such characters".into(),
            },
        )?)?;
        let (plain_dir, dir) = (
            c.dir().join(format!("gpt-plain-{seed}")),
            c.dir().join(format!("gpt-gathered-{seed}")),
        );
        // Held whole (as made), then released for the gathered save.
        let plain = save_checkpoint(&plain_dir, &model, &tokenizer, serde_json::json!({}));
        units.release_all()?;
        let gathered = save_checkpoint_gathered(
            &dir,
            &model,
            Some(&*units),
            &tokenizer,
            serde_json::json!({}),
            &*comm,
        );
        if units.is_held() {
            return Err(broke("save_checkpoint_gathered left the units held"));
        }
        Ok((plain, gathered, plain_dir, dir))
    };
    let (plain, gathered, plain_dir, dir) = match run() {
        Ok(v) => v,
        Err(e) if e.to_string().contains(BROKE) => return Outcome::Break(e.to_string()),
        Err(e) => return Outcome::Err(e.to_string()),
    };
    match (plain, gathered) {
        (Ok(()), Ok(())) => {
            let weights = |d: &std::path::Path| file_tensors(&d.join(MODEL_FILE), b);
            let same_weights = match (weights(&plain_dir), weights(&dir)) {
                (Ok(a), Ok(g)) => a == g,
                (a, g) => return Outcome::Break(format!("unreadable weights: {a:?} / {g:?}")),
            };
            let same_files = ["vocab.json", "config.json"]
                .iter()
                .all(|f| std::fs::read(plain_dir.join(f)).ok() == std::fs::read(dir.join(f)).ok());
            match same_weights && same_files {
                true => Outcome::Ok(Vec::new()),
                false => Outcome::Break(
                    "save_checkpoint_gathered wrote another folder than save_checkpoint".into(),
                ),
            }
        }
        (Err(_), Err(e)) => Outcome::Err(e.to_string()),
        (plain, gathered) => Outcome::Break(format!(
            "save_checkpoint gave {plain:?}, save_checkpoint_gathered {gathered:?}"
        )),
    }
}

/// `GptConfig::init_deferred` against `GptConfig::init` from the same seed: both fail alike
/// or the deferred model refuses to run (when a block holds a placeholder) until its blocks
/// are given values, directly (`Gpt::init_block`, in a drawn order, each block perhaps twice)
/// or through level-3 units (`ShardedUnits::initialize`, one rank); then the parameters are
/// the plain build's bit for bit and the loss is the plain model's.
fn gpt_deferred_build<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    use tessera_core::Generator;
    use tessera_nn::gpt::Gpt;
    let b = c.backend();
    let config = super::transformer::gpt_config(c, 0);
    let (seed, through_units, order) = (c.seed(7), c.flag(8), c.seed(9));
    let gpt_bits = |m: &Gpt<B>| -> Result<Vec<u64>> {
        let mut out = Vec::new();
        for (_, v) in m.parameters() {
            out.extend(v.value().to_vec_f64()?.into_iter().map(f64::to_bits));
        }
        Ok(out)
    };
    let built = (
        config.init(b, &mut Generator::new(seed)),
        config.init_deferred(b, &mut Generator::new(seed)),
    );
    let (plain, deferred) = match built {
        (Ok(p), Ok(d)) => (p, d),
        (Err(_), Err(e)) => return Outcome::Err(e.to_string()),
        // Placeholders fit where the whole model does not: its blocks then must not.
        (Err(tessera_core::Error::OutOfMemory { .. }), Ok(d)) => {
            let given = (0..config.n_layer).try_for_each(|block| d.init_block(block));
            return match given {
                Err(e) => Outcome::Err(e.to_string()),
                Ok(()) => Outcome::Break(
                    "init ran out of memory, init_deferred gave every block its values".into(),
                ),
            };
        }
        (p, d) => {
            return Outcome::Break(format!(
                "init gave {:?}, init_deferred {:?}",
                p.err(),
                d.err()
            ))
        }
    };
    let run = || -> Result<Outcome<B>> {
        let t = config.block_size.min(3);
        let tokens: Vec<i64> = (0..t)
            .map(|i| i.checked_rem(config.vocab_size).unwrap_or(0) as i64)
            .collect();
        let idx = Tensor::from_vec(tokens, [1, t], b)?;
        let has_placeholder = deferred
            .parameters()
            .iter()
            .any(|(_, v)| v.numel() > 1 && v.value().layout().strides().iter().all(|&s| s == 0));
        if has_placeholder && deferred.loss(&idx, &idx).is_ok() {
            return Ok(Outcome::Break(
                "a deferred GPT ran with placeholders in its blocks".into(),
            ));
        }
        let blocks = config.n_layer;
        if through_units {
            let comm: Arc<dyn Communicator<B>> = Arc::new(LocalCommunicator::new());
            let units = ShardedUnits::new(comm, deferred.block_prefixes())?;
            let _optimizer =
                ShardedOptimizer::with_units(deferred.parameters(), &units, 4096, |s| {
                    Sgd::new(s, SgdConfig::new(0.1))
                })?;
            deferred.shard_blocks(units.clone())?;
            units.initialize(&mut |block| deferred.init_block(block))?;
            units.gather_all()?;
        } else {
            // Every block once, in a drawn order, and one of them again.
            let mut blocks_in_order: Vec<usize> = (0..blocks).collect();
            let mut state = order;
            for i in (1..blocks).rev() {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                blocks_in_order.swap(i, (state >> 33) as usize % (i + 1));
            }
            if blocks > 0 {
                blocks_in_order.push((order as usize) % blocks);
            }
            for block in blocks_in_order {
                deferred.init_block(block)?;
            }
        }
        if deferred.init_block(blocks).is_ok() {
            return Ok(Outcome::Break(format!(
                "init_block accepted block {blocks} of {blocks}"
            )));
        }
        if gpt_bits(&plain)? != gpt_bits(&deferred)? {
            return Ok(Outcome::Break(
                "init_deferred + init_block gave other parameters than init".into(),
            ));
        }
        let loss = |m: &Gpt<B>| {
            tessera_autograd::no_grad(|| m.loss(&idx, &idx)).and_then(|l| l.value().to_scalar_f64())
        };
        Ok(match (loss(&plain), loss(&deferred)) {
            (Ok(a), Ok(d)) if a.to_bits() == d.to_bits() => Outcome::Ok(Vec::new()),
            (Err(_), Err(e)) => Outcome::Err(e.to_string()),
            (a, d) => Outcome::Break(format!("plain loss {a:?}, deferred {d:?}")),
        })
    };
    match run() {
        Ok(outcome) => outcome,
        Err(e) => Outcome::Err(e.to_string()),
    }
}

/// A cached decode of a GPT whose blocks are sharded and released (level 3, one rank; each
/// block gathered for its step by `ShardedUnits::run_without_graph`, maybe prefetched, or held
/// by its owner after `ShardedUnits::hold_by_owners`) against
/// the plain model's from the same seed: a prompt, then single tokens (ids now and then past
/// the vocabulary, steps now and then past the block size), each step's logits the same bit
/// for bit or both failing; after it no block holds values.
fn gpt_decoded_sharded<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    use tessera_core::Generator;
    use tessera_nn::gpt::{Gpt, GptCache};
    let b = c.backend();
    let config = super::transformer::gpt_config(c, 0);
    let (seed, prefetch, by_owners) = (c.seed(7), c.flag(8), c.flag(12));
    let (prompt_len, steps) = (c.size(9) % 6, c.size(10) % 5);
    let vocab = config.vocab_size.saturating_add(c.size(11) % 2);
    let tokens = |n: usize, from: usize| -> Vec<i64> {
        (0..n)
            .map(|i| {
                ((i + from) * 5 + seed as usize % 7)
                    .checked_rem(vocab)
                    .unwrap_or(0) as i64
            })
            .collect()
    };
    let decode = |m: &Gpt<B>| -> Result<Vec<Result<Vec<u64>>>> {
        let mut cache = GptCache::new(m.config(), 1, b)?;
        let mut out = Vec::new();
        let pieces = std::iter::once(tokens(prompt_len, 0))
            .chain((0..steps).map(|i| tokens(1, prompt_len + i)));
        for piece in pieces {
            let n = piece.len();
            let idx = Tensor::from_vec(piece, [1, n], b)?;
            let logits = m
                .forward_cached(&idx, &mut cache)
                .and_then(|l| l.to_vec_f64());
            out.push(logits.map(|v| v.into_iter().map(f64::to_bits).collect()));
        }
        Ok(out)
    };
    let run = || -> Result<Outcome<B>> {
        let plain = config.init(b, &mut Generator::new(seed))?;
        let model = config.init(b, &mut Generator::new(seed))?;
        let comm: Arc<dyn Communicator<B>> = Arc::new(LocalCommunicator::new());
        let units = ShardedUnits::new(comm, model.block_prefixes())?;
        let _optimizer = ShardedOptimizer::with_units(model.parameters(), &units, 4096, |s| {
            Sgd::new(s, SgdConfig::new(0.1))
        })?;
        model.shard_blocks(units.clone())?;
        units.release_all()?;
        units.set_prefetch(prefetch);
        if by_owners {
            units.hold_by_owners()?;
        }
        let (want, got) = (decode(&plain)?, decode(&model)?);
        if by_owners {
            // One rank owns every block: it held them whole for the decode.
            units.release_all()?;
        }
        for (step, (w, g)) in want.iter().zip(&got).enumerate() {
            match (w, g) {
                (Ok(w), Ok(g)) if w == g => {}
                (Err(_), Err(_)) => {}
                (w, g) => {
                    return Ok(Outcome::Break(format!(
                        "step {step}: the plain GPT gave {:?}, the released one {:?}",
                        w.as_ref().map(Vec::len),
                        g.as_ref().map(Vec::len)
                    )))
                }
            }
        }
        let holding = model.parameters().into_iter().find(|(name, v)| {
            name.starts_with("transformer.h.")
                && v.numel() > 1
                && !v.value().layout().strides().iter().all(|&s| s == 0)
        });
        Ok(match holding {
            Some((name, _)) => Outcome::Break(format!("{name} holds values after the decode")),
            None => match got.into_iter().find_map(|r| r.err()) {
                Some(e) => Outcome::Err(e.to_string()),
                None => Outcome::Ok(Vec::new()),
            },
        })
    };
    match run() {
        Ok(outcome) => outcome,
        Err(e) => Outcome::Err(e.to_string()),
    }
}

/// `ModelKind::build_deferred` against `ModelKind::build_with_precision` from the same seed:
/// the deferred model refuses to run until every layer has values, which
/// `ModelKind::init_unit` gives in a drawn order (one layer again, and now and then a unit
/// past the last, which must be refused); then the parameters are the plain build's bit for
/// bit.
fn reference_deferred_build<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    use tessera_nn::precision::Precision;
    let b = c.backend();
    let kind = if c.flag(0) {
        ModelKind::Mlp
    } else {
        ModelKind::Cnn
    };
    let (seed, order, extra) = (c.seed(1), c.seed(2), c.size(3) % 6);
    let precision = Precision::ALL[c.size(4) % 3];
    let run = || -> Result<Outcome<B>> {
        let plain = kind.build_with_precision(DType::F32, precision, seed, b)?;
        let deferred = kind.build_deferred(DType::F32, precision, seed, b)?;
        let dims: Vec<usize> = std::iter::once(1).chain(kind.sample_dims()).collect();
        let x = Var::constant(Tensor::zeros(dims, DType::F32, b)?);
        if deferred.forward(&x).is_ok() {
            return Ok(Outcome::Break(
                "a deferred reference model ran on placeholders".into(),
            ));
        }
        let units = deferred.unit_prefixes().len();
        let mut in_order: Vec<usize> = (0..units).collect();
        in_order.rotate_left(order as usize % units);
        in_order.push(extra);
        for unit in in_order {
            let given = kind.init_unit(&deferred, DType::F32, precision, seed, unit);
            match (given, unit < units) {
                (Ok(()), true) | (Err(_), false) => {}
                (Ok(()), false) => {
                    return Ok(Outcome::Break(format!(
                        "init_unit accepted unit {unit} of {units}"
                    )))
                }
                (Err(e), true) => return Err(e),
            }
        }
        Ok(match bits(&plain)? == bits(&deferred)? {
            true => Outcome::Ok(Vec::new()),
            false => Outcome::Break(
                "build_deferred + init_unit gave other parameters than the plain build".into(),
            ),
        })
    };
    match run() {
        Ok(outcome) => outcome,
        Err(e) => Outcome::Err(e.to_string()),
    }
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op(
            "GptConfig::init_deferred: blocks given values one at a time (Gpt::init_block, or ShardedUnits::initialize), against init",
            1,
            &[SIZE, SIZE, SIZE, SIZE, SIZE, B, F, SEED, B, SEED],
            NONE,
            |c| Ok(gpt_deferred_build(c)),
        )
        .work(|c| {
            let config = super::transformer::gpt_config(c, 0);
            Ok(super::transformer::gpt_work(&config).saturating_mul(3))
        }),
        op(
            "ShardedUnits::run_without_graph: a cached decode through a GPT's released blocks (maybe prefetched, or held by owners), against the plain GPT's",
            1,
            &[SIZE, SIZE, SIZE, SIZE, SIZE, B, F, SEED, B, SIZE, SIZE, SIZE, B],
            NONE,
            |c| Ok(gpt_decoded_sharded(c)),
        )
        .work(|c| {
            let config = super::transformer::gpt_config(c, 0);
            Ok(super::transformer::gpt_work(&config).saturating_mul(3))
        }),
        op(
            "ModelKind::build_deferred: layers given values one at a time (ModelKind::init_unit), against the plain build",
            1,
            &[B, SEED, SEED, SIZE, SIZE],
            NONE,
            |c| Ok(reference_deferred_build(c)),
        )
        .work(|_| Ok(1 << 23)),
        op(
            "ReferenceModel::shard_layers: level-3 MLP steps (maybe prefetched) against the plain ones",
            1,
            &[SIZE, SIZE, SIZE, SEED, SIZE, B],
            NONE,
            |c| Ok(level_three(c)),
        )
        .work(|_| Ok(1 << 22)),
        op(
            "ShardedUnits::hold_on: a level-3 MLP held on one rank between steps, against the plain one",
            1,
            &[SIZE, SIZE, SIZE, SEED, SIZE, B, SIZE],
            NONE,
            |c| Ok(level_three_held_on_one_rank(c)),
        )
        .work(|_| Ok(1 << 23)),
        op(
            "run::save_gathered_model: a level-3 MLP written a unit at a time between steps, against Module::save",
            1,
            &[SIZE, SIZE, SIZE, SEED, SIZE, B, SIZE],
            NONE,
            |c| Ok(level_three_saved_gathered(c)),
        )
        .work(|_| Ok(1 << 23)),
        op(
            "gpt::save_checkpoint_gathered: a GPT's released blocks written a block at a time, against save_checkpoint",
            1,
            &[SIZE, SIZE, SIZE, SIZE, SIZE, B, F, SEED, SIZE],
            NONE,
            |c| Ok(gpt_saved_gathered(c)),
        )
        .work(|c| {
            let config = super::transformer::gpt_config(c, 0);
            Ok(super::transformer::gpt_work(&config).saturating_mul(2))
        }),
        op(
            "Learner::sharded_units: a level-3 MLP's fit against the plain one",
            1,
            &[SIZE, SIZE, SIZE, SEED, B],
            NONE,
            |c| Ok(learner_level_three(c)),
        )
        .work(|_| Ok(1 << 23)),
        op(
            "Llama::shard_layers: level-3 Llama steps (maybe prefetched) against the plain ones",
            1,
            &[
                SIZE, SIZE, SIZE, SIZE, SIZE, SIZE, SIZE, SEED, SIZE, SIZE, B, B, B,
            ],
            NONE,
            |c| Ok(llama_level_three(c)),
        )
        .work(|_| Ok(1 << 23)),
    ]
}
