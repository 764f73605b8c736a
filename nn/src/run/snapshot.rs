//! Saving a whole run's state as one checkpoint, and restoring it.

use super::manifest::Manifest;
use super::run_dir::RunDir;
use crate::checkpoint::{self, CheckpointReader, LoadMode, TensorSpec};
use crate::distributed::ShardedUnits;
use crate::module::{model_vars, Module, RandomStream};
use crate::optim::{Optimizer, Prefixed, StateSource};
use crate::{Error, Result};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use tessera_core::{Backend, DType, Generator, Tensor};

/// The `format` of a run checkpoint (in its metadata and its manifest).
pub const CHECKPOINT_FORMAT: &str = "tessera-run-checkpoint-v1";

pub(super) const MODEL_PREFIX: &str = "model.";
pub(super) const OPTIM_PREFIX: &str = "optim.";
pub(super) const STREAM_PREFIX: &str = "rng.";
pub(super) const FORMAT_KEY: &str = "format";
pub(super) const STEP_KEY: &str = "run.step";
pub(super) const CONFIG_KEY: &str = "run.config";
pub(super) const STATE_KEY: &str = "run.state";
pub(super) const GROUPS_KEY: &str = "run.optimizers";

/// What [`resume`] restored.
#[derive(Clone, Debug, PartialEq)]
pub struct Resumed {
    /// The step the checkpoint was written at: the run continues with the next one.
    pub step: u64,
    /// The configuration of the run that wrote the checkpoint (equal to this run's but for
    /// the fields [`resume_allowing`] let differ).
    pub config: Value,
    /// The job's host state, as given to [`save_checkpoint`].
    pub state: Value,
    /// The checkpoint file restored (a sharded checkpoint's manifest).
    pub path: PathBuf,
    /// Newer checkpoints that were torn or corrupt and skipped, each with the reason.
    pub skipped: Vec<String>,
}

/// `(seed, offset)` of a generator: `advance(0)` reads the position without moving it.
fn position(generator: &Generator) -> (u64, u64) {
    generator.clone().advance(0)
}

/// The generator at `offset` of the stream `seed`.
fn generator_at(seed: u64, offset: u64) -> Generator {
    let mut g = Generator::new(seed);
    let mut left = offset;
    while left > 0 {
        let chunk = usize::try_from(left).unwrap_or(usize::MAX);
        g.advance(chunk);
        left -= chunk as u64;
    }
    g
}

fn encode_stream(stream: &RandomStream) -> String {
    let (seed, offset) = position(&stream.get());
    format!("{seed:016x}:{offset:016x}")
}

fn decode_stream(name: &str, text: &str) -> Result<Generator> {
    let parse = |s: &str| u64::from_str_radix(s, 16).ok();
    text.split_once(':')
        .and_then(|(s, o)| Some(generator_at(parse(s)?, parse(o)?)))
        .ok_or_else(|| {
            Error::checkpoint(format!(
                "random stream `{name}`: `{text}` is not a seed:offset pair"
            ))
        })
}

/// The model's random streams by name (copies: to move the model's own, visit them).
fn model_streams<B: Backend, M: Module<B> + ?Sized>(model: &M) -> Vec<(String, RandomStream)> {
    let mut out = Vec::new();
    model.visit_random_streams("", &mut |name, s| out.push((name.to_string(), s.clone())));
    out
}

pub(super) fn check_group_names(names: &[&str]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for name in names {
        if name.is_empty() || name.contains('.') || name.contains(',') || !seen.insert(*name) {
            return Err(Error::checkpoint(format!(
                "optimizer group names must be non-empty, unique and free of `.` and `,`; got \
                 {names:?}"
            )));
        }
    }
    Ok(())
}

/// Writes the state of a run at `step` into `dir` (committed as one step of the run folder): the model's
/// parameters, buffers and random streams, the state of each optimizer (named groups, e.g.
/// `[("decay", &a), ("no_decay", &b)]`), the run's `config` and the job's host `state` (its
/// counters, data position, host generators, loss scaler...). Also writes the configuration to
/// `run.json` in the run folder (the newest model, `model.safetensors`, is the job's to write:
/// [`RunDir::save_model`]). Returns the checkpoint's path.
///
/// Every tensor is read back from the device: call it between steps, not inside one.
pub fn save_checkpoint<B, M>(
    dir: &RunDir,
    step: u64,
    model: &M,
    optimizers: &[(&str, &dyn Optimizer<B>)],
    config: &Value,
    state: &Value,
) -> Result<PathBuf>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    let names: Vec<&str> = optimizers.iter().map(|(n, _)| *n).collect();
    check_group_names(&names)?;
    let mut tensors: Vec<(String, Tensor<B>)> = model_vars(model)
        .into_iter()
        .map(|(name, var)| (format!("{MODEL_PREFIX}{name}"), var.value()))
        .collect();
    for (group, optimizer) in optimizers {
        tensors.extend(
            optimizer
                .state()
                .into_iter()
                .map(|(key, t)| (format!("{OPTIM_PREFIX}{group}.{key}"), t)),
        );
    }
    let meta = head_metadata(step, model, config, state, &names);
    let entries = checkpoint::plan(tensors.iter().map(|(n, t)| (n.as_str(), t)))?;
    write_run_config(dir, config)?;
    // Streamed tensor by tensor: one tensor's host copy at a time, not the whole file.
    let path = dir.checkpoint_path(step);
    dir.commit_with(step, |out| {
        checkpoint::write_safetensors(out, &entries, &meta, &path).map(|_| ())
    })
}

/// The metadata of a checkpoint's head file: its format and step, the run's configuration
/// and host state, the optimizer groups and the model's random streams.
pub(super) fn head_metadata<B: Backend, M: Module<B> + ?Sized>(
    step: u64,
    model: &M,
    config: &Value,
    state: &Value,
    groups: &[&str],
) -> BTreeMap<String, String> {
    let mut meta = BTreeMap::new();
    meta.insert(FORMAT_KEY.to_string(), CHECKPOINT_FORMAT.to_string());
    meta.insert(STEP_KEY.to_string(), step.to_string());
    meta.insert(CONFIG_KEY.to_string(), config.to_string());
    meta.insert(STATE_KEY.to_string(), state.to_string());
    meta.insert(GROUPS_KEY.to_string(), groups.join(","));
    for (name, stream) in model_streams(model) {
        meta.insert(format!("{STREAM_PREFIX}{name}"), encode_stream(&stream));
    }
    meta
}

/// Writes the run's configuration to `run.json`.
pub(super) fn write_run_config(dir: &RunDir, config: &Value) -> Result<()> {
    let config_text = serde_json::to_vec_pretty(config)
        .map_err(|e| Error::checkpoint(format!("cannot write the configuration: {e}")))?;
    checkpoint::write_atomically(&dir.run_config_path(), &config_text)
}

/// Errors unless `metadata` says its file is the checkpoint of `step` (its format and step);
/// `path` names the file.
pub(super) fn check_head(
    metadata: &BTreeMap<String, String>,
    step: u64,
    path: &std::path::Path,
) -> Result<()> {
    let meta = |k: &str| metadata.get(k).map(String::as_str);
    if meta(FORMAT_KEY) != Some(CHECKPOINT_FORMAT) || meta(STEP_KEY) != Some(&step.to_string()) {
        return Err(Error::checkpoint(format!(
            "{}: not a {CHECKPOINT_FORMAT} file of step {step}",
            path.display()
        )));
    }
    Ok(())
}

/// A checkpoint opened for restoring: its (head file's) metadata, and its tensors, read on
/// demand (a one-file checkpoint is read whole; a sharded one tensor by tensor, or range by
/// range for an optimizer that keeps a share of the state).
pub(super) struct Opened<B: Backend> {
    /// The checkpoint file, or a sharded checkpoint's manifest.
    pub path: PathBuf,
    pub metadata: BTreeMap<String, String>,
    pub tensors: Box<dyn StateSource<B>>,
}

/// Opens the checkpoint of `step` and checks it against its manifest.
pub(super) fn read_verified<B: Backend>(dir: &RunDir, step: u64, backend: &B) -> Result<Opened<B>> {
    let manifest = Manifest::read(&dir.manifest_path(step))?;
    if manifest.step != step {
        return Err(Error::checkpoint(format!(
            "{}: the manifest is of step {}",
            dir.manifest_path(step).display(),
            manifest.step
        )));
    }
    if manifest.is_sharded() {
        manifest.check_format()?;
        return super::sharded::open_sharded(dir, &manifest, backend);
    }
    // Checked in blocks, then read one tensor at a time: a rank never holds the whole file.
    manifest.check_format()?;
    let path = dir.checkpoint_path(step);
    manifest.head().verify_file(&path)?;
    let reader = CheckpointReader::open(&path)?;
    let metadata = reader.info().metadata.clone();
    check_head(&metadata, step, &path)?;
    Ok(Opened {
        path,
        metadata,
        tensors: Box::new(FileSource {
            reader,
            backend: backend.clone(),
        }),
    })
}

/// A one-file checkpoint read one tensor at a time onto `backend`.
struct FileSource<B: Backend> {
    reader: CheckpointReader,
    backend: B,
}

impl<B: Backend> StateSource<B> for FileSource<B> {
    fn keys(&self) -> Vec<String> {
        self.reader.info().tensors.keys().cloned().collect()
    }

    fn spec(&self, key: &str) -> Option<(Vec<usize>, DType)> {
        let spec = self.reader.info().tensors.get(key)?;
        Some((spec.dims.clone(), spec.dtype))
    }

    fn read(&self, key: &str) -> Result<Tensor<B>> {
        self.reader.read(key, &self.backend)
    }
}

/// Errors naming the first field where `found` (the checkpoint's configuration) and `want`
/// (this run's) differ.
fn check_config(found: &Value, want: &Value, dir: &RunDir) -> Result<()> {
    if found == want {
        return Ok(());
    }
    let differs = |key: &str, a: Option<&Value>, b: Option<&Value>| {
        let show = |v: Option<&Value>| v.map_or("(absent)".to_string(), Value::to_string);
        Error::checkpoint(format!(
            "cannot resume from {}: it was written by a run with `{key}` = {}, and this run has \
             `{key}` = {} (resume with the same configuration, or train into another folder)",
            dir.root().display(),
            show(a),
            show(b)
        ))
    };
    match (found.as_object(), want.as_object()) {
        (Some(a), Some(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            let key = keys
                .into_iter()
                .find(|k| a.get(*k) != b.get(*k))
                .expect("the objects differ");
            Err(differs(key, a.get(key), b.get(key)))
        }
        _ => Err(differs("config", Some(found), Some(want))),
    }
}

/// Restores the newest whole checkpoint of `dir` into `model` and `optimizers` (the same
/// groups as saved) and returns what it found, or `None` when `dir` has no checkpoint (a fresh
/// run). A checkpoint whose file does not match its manifest (torn, corrupt, missing) is
/// skipped for the one before, and listed in [`Resumed::skipped`]. A checkpoint of another
/// configuration, model or optimizer setup is an error naming the difference; then nothing
/// has changed.
pub fn resume<B, M>(
    dir: &RunDir,
    model: &M,
    optimizers: &mut [(&str, &mut dyn Optimizer<B>)],
    config: &Value,
    backend: &B,
) -> Result<Option<Resumed>>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    resume_allowing(dir, model, optimizers, config, backend, &[])
}

/// [`resume`], accepting a checkpoint whose configuration differs from `config` in the
/// top-level fields `may_differ` (e.g. `["world_size"]` for a job that can continue on
/// another number of ranks: the checkpoint's model and optimizer state do not depend on it);
/// [`Resumed::config`] tells the job what they were.
pub fn resume_allowing<B, M>(
    dir: &RunDir,
    model: &M,
    optimizers: &mut [(&str, &mut dyn Optimizer<B>)],
    config: &Value,
    backend: &B,
    may_differ: &[&str],
) -> Result<Option<Resumed>>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    resume_into(dir, model, None, optimizers, config, backend, may_differ)
}

/// [`resume_allowing`] for a model whose `units` shard their parameters (level 3), as made by
/// [`crate::distributed::ShardedOptimizer::with_units`] and not yet released: the units'
/// tensors are read one unit at a time, and each rank keeps only its shares
/// ([`ShardedUnits::initialize`]), so that no rank holds the whole model (nor reads it all at
/// once). A collective: every rank calls it, and the units end released (in place of
/// [`ShardedUnits::release_all`]). When `dir` has no checkpoint, nothing happens and the
/// units stay held (give them their values, e.g. with `ShardedUnits::initialize`). The checks
/// of `resume` come before anything changes; an error while reading the units' tensors (after
/// the file was verified) leaves the model partly restored.
pub fn resume_sharded<B, M>(
    dir: &RunDir,
    model: &M,
    units: &ShardedUnits<B>,
    optimizers: &mut [(&str, &mut dyn Optimizer<B>)],
    config: &Value,
    backend: &B,
    may_differ: &[&str],
) -> Result<Option<Resumed>>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    if !units.is_held_everywhere() {
        return Err(Error::InvalidArgument {
            op: "run::resume_sharded",
            msg: "the units must not be released yet (restore right after with_units)".into(),
        });
    }
    resume_into(
        dir,
        model,
        Some(units),
        optimizers,
        config,
        backend,
        may_differ,
    )
}

/// [`resume_allowing`] and [`resume_sharded`].
fn resume_into<B, M>(
    dir: &RunDir,
    model: &M,
    units: Option<&ShardedUnits<B>>,
    optimizers: &mut [(&str, &mut dyn Optimizer<B>)],
    config: &Value,
    backend: &B,
    may_differ: &[&str],
) -> Result<Option<Resumed>>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    let names: Vec<&str> = optimizers.iter().map(|(n, _)| *n).collect();
    check_group_names(&names)?;
    let steps = dir.steps()?;
    if steps.is_empty() {
        return Ok(None);
    }
    let mut skipped = Vec::new();
    for &step in steps.iter().rev() {
        let file = match read_verified(dir, step, backend) {
            Ok(file) => file,
            Err(e) => {
                skipped.push(format!("step {step}: {e}"));
                continue;
            }
        };
        let found_config: Value = parse_meta(&file.metadata, CONFIG_KEY)?;
        check_config(
            &without(&found_config, may_differ),
            &without(config, may_differ),
            dir,
        )?;
        let state: Value = parse_meta(&file.metadata, STATE_KEY)?;
        let path = file.path.clone();
        restore(file, model, units, optimizers, &names)?;
        return Ok(Some(Resumed {
            step,
            config: found_config,
            state,
            path,
            skipped,
        }));
    }
    Err(Error::checkpoint(format!(
        "no checkpoint in {} can be restored: {}",
        dir.checkpoints_dir().display(),
        skipped.join("; ")
    )))
}

/// `config` without the top-level fields `keys`.
fn without(config: &Value, keys: &[&str]) -> Value {
    let mut out = config.clone();
    if let Some(object) = out.as_object_mut() {
        for key in keys {
            object.remove(*key);
        }
    }
    out
}

fn parse_meta(metadata: &BTreeMap<String, String>, key: &str) -> Result<Value> {
    let text = metadata
        .get(key)
        .ok_or_else(|| Error::checkpoint(format!("the checkpoint has no `{key}`")))?;
    serde_json::from_str(text)
        .map_err(|e| Error::checkpoint(format!("the checkpoint's `{key}` is not JSON: {e}")))
}

/// Checks everything in `file` against the model and optimizers, then restores it; on an
/// error nothing has changed. The model's tensors are read whole; each optimizer reads its
/// group's state through [`Optimizer::load_state_from`] (a sharded optimizer only its share).
fn restore<B, M>(
    file: Opened<B>,
    model: &M,
    units: Option<&ShardedUnits<B>>,
    optimizers: &mut [(&str, &mut dyn Optimizer<B>)],
    names: &[&str],
) -> Result<()>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    let Opened {
        metadata, tensors, ..
    } = file;
    let saved_groups = metadata.get(GROUPS_KEY).cloned().unwrap_or_default();
    let saved: Vec<&str> = saved_groups.split(',').filter(|s| !s.is_empty()).collect();
    if saved != names {
        return Err(Error::checkpoint(format!(
            "the checkpoint holds the optimizer groups {saved:?}, this run has {names:?}"
        )));
    }
    let mut found = BTreeMap::new();
    for key in tensors.keys() {
        if let Some(rest) = key.strip_prefix(MODEL_PREFIX) {
            let (dims, dtype) = tensors.spec(&key).expect("a listed key has a spec");
            found.insert(rest.to_string(), TensorSpec::new(rest, dims, dtype));
        } else if !key
            .strip_prefix(OPTIM_PREFIX)
            .and_then(|rest| rest.split_once('.'))
            .is_some_and(|(group, _)| names.contains(&group))
        {
            return Err(Error::checkpoint(format!(
                "unexpected tensor `{key}` in the checkpoint"
            )));
        }
    }
    // The model: the same tensors, dims and dtypes.
    let targets = model_vars(model);
    let specs: Vec<TensorSpec> = targets
        .iter()
        .map(|(name, var)| TensorSpec::new(name.clone(), var.dims().to_vec(), var.dtype()))
        .collect();
    checkpoint::check_specs(&found, &specs, LoadMode::Strict)?;
    // The random streams: the same names.
    let streams = model_streams(model);
    let mut positions = BTreeMap::new();
    for (name, _) in &streams {
        let text = metadata
            .get(&format!("{STREAM_PREFIX}{name}"))
            .ok_or_else(|| {
                Error::checkpoint(format!("the checkpoint has no random stream `{name}`"))
            })?;
        positions.insert(name.clone(), decode_stream(name, text)?);
    }
    let saved_streams = metadata
        .keys()
        .filter(|k| k.starts_with(STREAM_PREFIX))
        .count();
    if saved_streams != streams.len() {
        return Err(Error::checkpoint(format!(
            "the checkpoint holds {saved_streams} random streams, the model has {}",
            streams.len()
        )));
    }
    // The model's values, read before anything changes; the units' later, one at a time.
    let target_units: Vec<Option<usize>> = targets
        .iter()
        .map(|(name, _)| units.and_then(|u| u.unit_of(name)))
        .collect();
    let values = targets
        .iter()
        .zip(&target_units)
        .map(|((name, _), unit)| match unit {
            Some(_) => Ok(None),
            None => tensors.read(&format!("{MODEL_PREFIX}{name}")).map(Some),
        })
        .collect::<Result<Vec<_>>>()?;
    // The optimizers, each rolled back if a later one refuses its state.
    let before: Vec<Vec<(String, Tensor<B>)>> = optimizers.iter().map(|(_, o)| o.state()).collect();
    for i in 0..optimizers.len() {
        let (group, optimizer) = &mut optimizers[i];
        let view = Prefixed {
            source: &*tensors,
            prefix: format!("{OPTIM_PREFIX}{group}."),
        };
        if let Err(e) = optimizer.load_state_from(&view) {
            for (j, old) in before.iter().enumerate().take(i) {
                optimizers[j].1.load_state(old)?;
            }
            return Err(e);
        }
    }
    for ((_, var), value) in targets.iter().zip(values) {
        if let Some(value) = value {
            var.set_value(value)?;
        }
    }
    model.visit_random_streams("", &mut |name, stream| {
        if let Some(generator) = positions.get(name) {
            stream.set(generator.clone());
        }
    });
    if let Some(units) = units {
        units.initialize(&mut |unit| {
            for ((name, var), _) in targets
                .iter()
                .zip(&target_units)
                .filter(|(_, u)| **u == Some(unit))
            {
                var.set_value(tensors.read(&format!("{MODEL_PREFIX}{name}"))?)?;
            }
            Ok(())
        })?;
    }
    Ok(())
}
