//! Sharded run checkpoints: every rank writes its own part of a state spread over the ranks
//! (a [`crate::distributed::ShardedOptimizer`]'s shares), and rank 0 a manifest naming the
//! files. Nothing is gathered to save; the files load into any number of ranks, and
//! [`consolidate_checkpoint`] turns them into the ordinary one-file checkpoint.
//!
//! ```text
//! DIR/checkpoints/step-000000000120.rank-00000-of-00002.safetensors   rank 0's pieces, the whole
//!                                                                   tensors, the run's metadata
//! DIR/checkpoints/step-000000000120.rank-00001-of-00002.safetensors   rank 1's pieces
//! DIR/checkpoints/step-000000000120.json                              manifest: every file's size
//!                                                                   and CRC-32, written last
//! ```
//!
//! A tensor spread over the ranks is stored as pieces: elements `[offset, offset + n)` of the
//! flattened tensor, under the name `"<tensor>@<offset>"`; each file's `run.pieces` metadata
//! (JSON) maps those names to the whole tensor's name, offset and dims. The whole tensors (a
//! buffer, a parameter no sharded optimizer covers, a step count) are in rank 0's file under
//! their ordinary names, with the metadata of a one-file checkpoint.

use super::manifest::{Manifest, ShardFile};
use super::run_dir::RunDir;
use super::snapshot::{
    check_group_names, check_head, head_metadata, read_verified, write_run_config, Opened,
    FORMAT_KEY, MODEL_PREFIX, OPTIM_PREFIX, STEP_KEY,
};
use crate::checkpoint::{self, CheckpointReader, SpooledSafetensors};
use crate::distributed::{save_on_rank0, Communicator, Reduction};
use crate::module::{model_vars, Module};
use crate::optim::{Optimizer, StateSource, TensorPiece};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use tessera_core::{Backend, DType, Tensor};

/// Metadata of every file of a sharded checkpoint: its rank, the number of files and its
/// pieces.
const RANK_KEY: &str = "run.rank";
const WORLD_KEY: &str = "run.world_size";
const PIECES_KEY: &str = "run.pieces";

/// Where a piece stored in a file belongs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct PieceInfo {
    /// The whole tensor's name.
    of: String,
    /// The piece's first element in the flattened whole tensor.
    offset: usize,
    /// The whole tensor's dims.
    dims: Vec<usize>,
}

/// One rank's file: tensors by name, and the pieces among them.
struct RankFile<B: Backend> {
    tensors: Vec<(String, Tensor<B>)>,
    pieces: BTreeMap<String, PieceInfo>,
}

impl<B: Backend> RankFile<B> {
    fn add_piece(&mut self, name: String, piece: &TensorPiece<B>) {
        let key = format!("{name}@{}", piece.offset);
        self.pieces.insert(
            key.clone(),
            PieceInfo {
                of: name,
                offset: piece.offset,
                dims: piece.dims.clone(),
            },
        );
        self.tensors.push((key, piece.values.clone()));
    }
}

/// Writes the run state at `step` as a sharded checkpoint (a collective: every rank of `comm`
/// calls it with its own model and optimizers). Each rank writes the pieces its optimizers own
/// ([`Optimizer::local_shards`]: a [`crate::distributed::ShardedOptimizer`]'s shares of the
/// parameters and of its state) without gathering anything; rank 0 also writes everything held
/// whole (buffers, parameters of no sharded optimizer, the state of unsharded optimizers, step
/// counts), the run's configuration, host `state` and random streams, then, once every rank's
/// file is written, the manifest that makes the checkpoint exist. [`super::resume`] reads it
/// back at any number of ranks. When any rank fails, every rank returns an error and no
/// manifest is written (the previous checkpoint stays the newest). Returns the manifest's
/// path.
///
/// Call it between steps, on every rank, where a one-file save would call
/// [`Optimizer::prepare_checkpoint`] and [`super::save_checkpoint`]; a level-3 model's units
/// may stay released.
#[allow(clippy::too_many_arguments)]
pub fn save_sharded_checkpoint<B, M>(
    dir: &RunDir,
    step: u64,
    model: &M,
    optimizers: &[(&str, &dyn Optimizer<B>)],
    config: &Value,
    state: &Value,
    comm: &dyn Communicator<B>,
) -> Result<PathBuf>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    let names: Vec<&str> = optimizers.iter().map(|(n, _)| *n).collect();
    check_group_names(&names)?;
    let (rank, world) = (comm.rank(), comm.world_size());
    let written = write_rank_file(dir, step, model, optimizers, &names, config, state, comm);
    // Every rank's outcome, size and checksum (exact in f64: both fit in 53 bits).
    let mut records = vec![0.0; 3 * world];
    if let Ok(file) = &written {
        records[3 * rank] = 1.0;
        records[3 * rank + 1] = file.bytes as f64;
        records[3 * rank + 2] = u32::from_str_radix(&file.crc32, 16).unwrap_or(0) as f64;
    }
    comm.all_reduce_host(&mut records, Reduction::Sum)?;
    written?;
    if let Some(failed) = (0..world).find(|r| records[3 * r] != 1.0) {
        return Err(Error::checkpoint(format!(
            "rank {failed} could not write its part of the checkpoint of step {step} (its error \
             is in its own output); rank {rank} stops too"
        )));
    }
    let files: Vec<ShardFile> = (0..world)
        .map(|r| {
            ShardFile::new(
                RunDir::shard_file_name(step, r, world),
                records[3 * r + 1] as u64,
                records[3 * r + 2] as u32,
            )
        })
        .collect();
    save_on_rank0(comm, || {
        write_run_config(dir, config)?;
        dir.commit_manifest(&Manifest::sharded(step, files))
    })?;
    Ok(dir.manifest_path(step))
}

/// Writes this rank's file of the sharded checkpoint of `step` (`groups`: the optimizers'
/// names, checked).
#[allow(clippy::too_many_arguments)]
fn write_rank_file<B, M>(
    dir: &RunDir,
    step: u64,
    model: &M,
    optimizers: &[(&str, &dyn Optimizer<B>)],
    groups: &[&str],
    config: &Value,
    state: &Value,
    comm: &dyn Communicator<B>,
) -> Result<ShardFile>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    let (rank, world) = (comm.rank(), comm.world_size());
    let mut file = RankFile {
        tensors: Vec::new(),
        pieces: BTreeMap::new(),
    };
    let local = optimizers
        .iter()
        .map(|(_, o)| o.local_shards())
        .collect::<Result<Vec<_>>>()?;
    let covered: BTreeSet<&str> = local
        .iter()
        .flatten()
        .flat_map(|l| l.covered.iter().map(String::as_str))
        .collect();
    if rank == 0 {
        for (name, var) in model_vars(model) {
            if !covered.contains(name.as_str()) {
                file.tensors
                    .push((format!("{MODEL_PREFIX}{name}"), var.value()));
            }
        }
    }
    for ((group, optimizer), shards) in optimizers.iter().zip(&local) {
        match shards {
            Some(shards) => {
                for piece in &shards.parameters {
                    file.add_piece(format!("{MODEL_PREFIX}{}", piece.name), piece);
                }
                for piece in &shards.state {
                    file.add_piece(format!("{OPTIM_PREFIX}{group}.{}", piece.name), piece);
                }
                if rank == 0 {
                    for (key, t) in &shards.replicated_state {
                        file.tensors
                            .push((format!("{OPTIM_PREFIX}{group}.{key}"), t.clone()));
                    }
                }
            }
            None if rank == 0 => {
                for (key, t) in optimizer.state() {
                    file.tensors
                        .push((format!("{OPTIM_PREFIX}{group}.{key}"), t));
                }
            }
            None => {}
        }
    }
    let mut meta = if rank == 0 {
        head_metadata(step, model, config, state, groups)
    } else {
        let mut m = BTreeMap::new();
        m.insert(FORMAT_KEY.to_string(), super::CHECKPOINT_FORMAT.to_string());
        m.insert(STEP_KEY.to_string(), step.to_string());
        m
    };
    meta.insert(RANK_KEY.to_string(), rank.to_string());
    meta.insert(WORLD_KEY.to_string(), world.to_string());
    let pieces = serde_json::to_string(&file.pieces)
        .map_err(|e| Error::checkpoint(format!("cannot write the pieces' index: {e}")))?;
    meta.insert(PIECES_KEY.to_string(), pieces);
    let entries = checkpoint::plan(file.tensors.iter().map(|(n, t)| (n.as_str(), t)))?;
    let path = dir.shard_path(step, rank, world);
    dir.write_shard(step, rank, world, |out| {
        checkpoint::write_safetensors(out, &entries, &meta, &path).map(|_| ())
    })
}

/// Where one tensor of a sharded checkpoint is stored.
enum Stored {
    /// Whole, in rank 0's file, under its own name.
    Whole { key: String },
    /// In pieces: `(offset, elements, file, key)` sorted by offset, covering the tensor once.
    Pieces {
        dims: Vec<usize>,
        dtype: DType,
        parts: Vec<(usize, usize, usize, String)>,
    },
}

/// The files of a sharded checkpoint, opened (headers read and checked, every file's size
/// and checksum checked against the manifest), read one tensor or one range at a time.
struct ShardedSource<B: Backend> {
    backend: B,
    files: Vec<CheckpointReader>,
    index: BTreeMap<String, Stored>,
}

impl<B: Backend> StateSource<B> for ShardedSource<B> {
    fn keys(&self) -> Vec<String> {
        self.index.keys().cloned().collect()
    }

    fn spec(&self, key: &str) -> Option<(Vec<usize>, DType)> {
        match self.index.get(key)? {
            Stored::Whole { key } => {
                let spec = self.files[0].info().tensors.get(key)?;
                Some((spec.dims.clone(), spec.dtype))
            }
            Stored::Pieces { dims, dtype, .. } => Some((dims.clone(), *dtype)),
        }
    }

    fn read(&self, key: &str) -> Result<Tensor<B>> {
        match self.index.get(key) {
            Some(Stored::Whole { key }) => self.files[0].read(key, &self.backend),
            Some(Stored::Pieces { dims, .. }) => {
                let numel = dims.iter().product();
                self.read_range(key, 0, numel)?.reshape(dims.clone())
            }
            None => Err(Error::checkpoint(format!(
                "the checkpoint has no tensor `{key}`"
            ))),
        }
    }

    fn read_range(&self, key: &str, offset: usize, len: usize) -> Result<Tensor<B>> {
        let Some(Stored::Pieces { dims, parts, .. }) = self.index.get(key) else {
            let whole = self.read(key)?;
            let n = whole.numel();
            return whole.reshape([n])?.narrow(0, offset, len)?.compact();
        };
        let numel: usize = dims.iter().product();
        if offset + len > numel {
            return Err(Error::checkpoint(format!(
                "elements {offset}..{} of `{key}`, which has {numel}",
                offset + len
            )));
        }
        // Only the pieces that overlap the range are read.
        let mut pieces = Vec::new();
        for (start, n, file, stored) in parts {
            let (a, b) = ((*start).max(offset), (start + n).min(offset + len));
            if a < b {
                let piece = self.files[*file].read(stored, &self.backend)?;
                pieces.push(piece.narrow(0, a - start, b - a)?.compact()?);
            }
        }
        match pieces.len() {
            1 => Ok(pieces.pop().expect("one piece")),
            _ => Tensor::cat(&pieces.iter().collect::<Vec<_>>(), 0),
        }
    }
}

/// Opens the sharded checkpoint `manifest` describes: every file checked against it (size and
/// CRC-32, read in blocks) and its header read; the pieces' index checked to cover every
/// tensor exactly once. No tensor is read yet.
pub(super) fn open_sharded<B: Backend>(
    dir: &RunDir,
    manifest: &Manifest,
    backend: &B,
) -> Result<Opened<B>> {
    let (step, world) = (manifest.step, manifest.shards.len());
    let mut files = Vec::with_capacity(world);
    let mut metadata = BTreeMap::new();
    let mut index: BTreeMap<String, Stored> = BTreeMap::new();
    for (rank, shard) in manifest.shards.iter().enumerate() {
        let expected = RunDir::shard_file_name(step, rank, world);
        if shard.file != expected {
            return Err(Error::checkpoint(format!(
                "the manifest of step {step} names `{}` as rank {rank}'s file of {world}, not \
                 `{expected}`",
                shard.file
            )));
        }
        let path = dir.shard_path(step, rank, world);
        shard.verify_file(&path)?;
        let file = CheckpointReader::open(&path)?;
        let meta = &file.info().metadata;
        check_head(meta, step, &path)?;
        let get = |k: &str| meta.get(k).cloned();
        if get(RANK_KEY) != Some(rank.to_string()) || get(WORLD_KEY) != Some(world.to_string()) {
            return Err(Error::checkpoint(format!(
                "{}: not rank {rank}'s file of {world}",
                path.display()
            )));
        }
        let pieces: BTreeMap<String, PieceInfo> = match get(PIECES_KEY) {
            Some(text) => serde_json::from_str(&text).map_err(|e| {
                Error::checkpoint(format!(
                    "{}: its index of pieces is not valid: {e}",
                    path.display()
                ))
            })?,
            None => BTreeMap::new(),
        };
        for key in pieces.keys() {
            if !file.info().tensors.contains_key(key) {
                return Err(Error::checkpoint(format!(
                    "{}: the piece `{key}` its index names is missing",
                    path.display()
                )));
            }
        }
        if rank == 0 {
            metadata = meta.clone();
            for key in [RANK_KEY, WORLD_KEY, PIECES_KEY] {
                metadata.remove(key);
            }
        }
        for (key, spec) in &file.info().tensors {
            match pieces.get(key) {
                Some(info) => {
                    let entry = index
                        .entry(info.of.clone())
                        .or_insert_with(|| Stored::Pieces {
                            dims: info.dims.clone(),
                            dtype: spec.dtype,
                            parts: Vec::new(),
                        });
                    match entry {
                        Stored::Pieces { dims, dtype, parts }
                            if *dims == info.dims
                                && *dtype == spec.dtype
                                && spec.dims.len() == 1 =>
                        {
                            parts.push((info.offset, spec.dims[0], rank, key.clone()));
                        }
                        _ => {
                            return Err(Error::checkpoint(format!(
                                "the pieces of `{}` disagree on its dims or dtype, or one is not \
                                 a vector",
                                info.of
                            )))
                        }
                    }
                }
                None if rank == 0 => {
                    let whole = Stored::Whole { key: key.clone() };
                    if index.insert(key.clone(), whole).is_some() {
                        return Err(Error::checkpoint(format!(
                            "`{key}` is stored both whole and in pieces"
                        )));
                    }
                }
                None => {
                    return Err(Error::checkpoint(format!(
                        "{}: `{key}` is neither a piece nor in rank 0's file",
                        path.display()
                    )))
                }
            }
        }
        files.push(file);
    }
    for (name, stored) in index.iter_mut() {
        if let Stored::Pieces { dims, parts, .. } = stored {
            parts.sort();
            let numel: usize = dims.iter().product();
            let mut next = 0;
            for (offset, n, _, _) in parts.iter() {
                if *offset != next {
                    return Err(Error::checkpoint(format!(
                        "the pieces of `{name}` do not fit together: one of {n} elements starts \
                         at {offset}, where {next} was expected"
                    )));
                }
                next += n;
            }
            if next != numel {
                return Err(Error::checkpoint(format!(
                    "the pieces of `{name}` hold {next} elements, its dims {dims:?} need {numel}"
                )));
            }
        }
    }
    let tensors = ShardedSource {
        backend: backend.clone(),
        files,
        index,
    };
    Ok(Opened {
        path: dir.manifest_path(step),
        metadata,
        tensors: Box::new(tensors),
    })
}

/// Rewrites the sharded checkpoint of `step` in `dir` as the ordinary one-file checkpoint
/// (what [`super::save_checkpoint`] writes for the same state; the run's `latest` pointer is
/// left alone), then removes the ranks' files. One process does it, tensor by tensor: `backend`
/// holds one whole tensor at a time, spooled to disk. A one-file checkpoint is left as it is.
/// Returns the checkpoint's path.
pub fn consolidate_checkpoint<B: Backend>(dir: &RunDir, step: u64, backend: &B) -> Result<PathBuf> {
    let manifest = Manifest::read(&dir.manifest_path(step))?;
    let path = dir.checkpoint_path(step);
    if !manifest.is_sharded() {
        return Ok(path);
    }
    let opened = read_verified(dir, step, backend)?;
    let mut spool = SpooledSafetensors::new(dir.checkpoints_dir());
    for key in opened.tensors.keys() {
        spool.add(&key, &opened.tensors.read(&key)?)?;
    }
    let file = dir.write_file(&path, |out| {
        spool.finish(out, &opened.metadata, &path).map(|_| ())
    })?;
    // The manifest switches to the new file atomically; the ranks' files go after.
    dir.write_manifest(&Manifest::of_one_file(step, file))?;
    for shard in dir.shard_files(step)? {
        std::fs::remove_file(&shard).map_err(|e| Error::io(&shard, e))?;
    }
    Ok(path)
}
