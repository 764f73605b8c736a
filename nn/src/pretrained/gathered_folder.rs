//! A Hugging Face folder written from rank 0 while a level-3 model's blocks stay sharded: each
//! block's parameters are gathered to rank 0 one at a time and spooled to disk
//! ([`SpooledSafetensors`], one per weights file), so that no rank holds the whole model to
//! save it.

use super::folder_source::Stored;
use super::hf_files::{plan_shards, weights_metadata, write_planned_folder};
use crate::checkpoint::{write_atomically_with, SpooledSafetensors};
use crate::distributed::{all_ranks_ok, Communicator, ShardedUnits};
use crate::module::model_vars;
use crate::run::visit_model_on_rank0;
use crate::Module;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use tessera_core::{Backend, Error, Result};

/// Writes `model` as the folder `dir` (`config` as `config.json`, each tensor where
/// `stored_as` places it, weights files of at most `max_shard_bytes`: what
/// [`super::hf_files::write_folder`] writes for the same tensors) from rank 0, a collective:
/// the tensors outside `units` from rank 0's copy, each unit's gathered to rank 0 in turn
/// ([`ShardedUnits::visit_whole_on`]) and spooled in `dir`, then every file written. When any
/// rank fails, every rank returns an error.
pub(crate) fn write_folder_gathered<B, M>(
    dir: &Path,
    config: &Map<String, Value>,
    model: &M,
    stored_as: &dyn Fn(&str) -> Option<Stored>,
    max_shard_bytes: u64,
    units: Option<&ShardedUnits<B>>,
    comm: &dyn Communicator<B>,
) -> Result<()>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    // Every stored tensor's size, from its dims: a released unit's placeholders have them.
    let mut sizes = BTreeMap::new();
    for (name, var) in model_vars(model) {
        if let Some(stored) = stored_as(&name) {
            let bytes = var.numel() as u64 * var.dtype().size_in_bytes() as u64;
            sizes.insert(stored.name, bytes);
        }
    }
    let sizes: Vec<(String, u64)> = sizes.into_iter().collect();
    let shards = plan_shards(&sizes, max_shard_bytes)?;
    let shard_of: BTreeMap<&str, usize> = (shards.iter().enumerate())
        .flat_map(|(i, names)| names.iter().map(move |&n| (n, i)))
        .collect();
    // Rank 0 spools each file's tensors as they come; the others only send.
    let mut spools = match comm.rank() {
        0 => std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(dir, e))
            .map(|()| {
                Some(
                    shards
                        .iter()
                        .map(|_| SpooledSafetensors::new(dir))
                        .collect::<Vec<_>>(),
                )
            }),
        _ => Ok(None),
    };
    let visited = visit_model_on_rank0(model, units, comm, &mut |name, tensor| {
        let (Ok(Some(spools)), Some(stored)) = (&mut spools, stored_as(name)) else {
            return Ok(());
        };
        let spool: &mut SpooledSafetensors = &mut spools[shard_of[stored.name.as_str()]];
        spool.add(&stored.name, &stored.layout(tensor.clone())?)
    });
    let written = visited.and(spools).and_then(|spools| {
        let Some(spools) = spools else {
            return Ok(());
        };
        let mut spools: Vec<Option<SpooledSafetensors>> = spools.into_iter().map(Some).collect();
        let metadata = weights_metadata();
        write_planned_folder(dir, config, &sizes, &shards, &mut |shard, path| {
            let spool = spools[shard].take().expect("each file is written once");
            write_atomically_with(path, |out| spool.finish(out, &metadata, path).map(|_| ()))
        })
    });
    all_ranks_ok(comm, written, "write the model folder")
}
