//! A model's tensors written from rank 0 while a level-3 model's units stay released: each
//! unit's parameters are gathered to rank 0 one at a time and spooled to disk
//! ([`crate::checkpoint::SpooledSafetensors`]), so that no rank holds the whole model to save
//! it.

use crate::checkpoint::{self, folder_of, write_atomically_with, SpooledSafetensors};
use crate::distributed::{all_ranks_ok, save_on_rank0, Communicator, ShardedUnits};
use crate::module::model_vars;
use crate::module::Module;
use crate::Result;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use tessera_core::{Backend, Tensor};

/// Hands `model`'s parameters and buffers to `visit` by name on rank 0 (a collective when
/// `units` is given: every rank of `comm` calls it): the tensors no unit holds from rank 0's
/// own copy, then every unit's parameters gathered to rank 0 a unit at a time
/// ([`ShardedUnits::visit_whole_on`]). A tensor visited under two names (tied weights) is
/// handed over under both. An error of `visit` is returned after the gathers (which still run
/// on every rank), and `visit` is not called after it.
pub(crate) fn visit_model_on_rank0<B, M>(
    model: &M,
    units: Option<&ShardedUnits<B>>,
    comm: &dyn Communicator<B>,
    visit: &mut dyn FnMut(&str, &Tensor<B>) -> Result<()>,
) -> Result<()>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    let in_units: BTreeSet<u64> = units.map(|u| u.parameter_ids()).unwrap_or_default();
    // Every name of each unit parameter, by id.
    let mut unit_names: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut failed = None;
    for (name, var) in model_vars(model) {
        if in_units.contains(&var.id()) {
            unit_names.entry(var.id()).or_default().push(name);
        } else if comm.rank() == 0 && failed.is_none() {
            failed = visit(&name, &var.value()).err();
        }
    }
    if let Some(units) = units {
        let gathered = units.visit_whole_on(0, &mut |var, whole| {
            if failed.is_some() {
                return Ok(());
            }
            // A unit parameter the model does not visit is not part of the model's file.
            for name in unit_names.get(&var.id()).into_iter().flatten() {
                visit(name, whole)?;
            }
            Ok(())
        });
        if let Err(e) = gathered {
            failed.get_or_insert(e);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// Writes `model`'s parameters and buffers to the safetensors file `path` with `metadata`,
/// atomically: what [`crate::checkpoint::save`] of its [`Module::state_dict`] writes, from rank
/// 0 (a collective: every rank of `comm` calls it), with a level-3 model's `units` gathered to
/// rank 0 a unit at a time instead of held whole ([`ShardedUnits::hold_on`]). Rank 0 spools the
/// tensors in `path`'s folder (which must exist) and then writes the file (without `units`,
/// it writes its own copy directly). When any rank fails, every rank returns an error.
pub fn save_gathered_model<B, M>(
    path: &Path,
    model: &M,
    units: Option<&ShardedUnits<B>>,
    metadata: &BTreeMap<String, String>,
    comm: &dyn Communicator<B>,
) -> Result<()>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    let Some(units) = units else {
        // Nothing to gather: rank 0 writes its own copy.
        let tensors = model.state_dict();
        return save_on_rank0(comm, || checkpoint::save(path, tensors.iter(), metadata));
    };
    let mut spool = (comm.rank() == 0).then(|| SpooledSafetensors::new(folder_of(path)));
    let visited = visit_model_on_rank0(model, Some(units), comm, &mut |name, tensor| {
        spool.as_mut().map_or(Ok(()), |s| s.add(name, tensor))
    });
    let written = visited.and_then(|()| match spool {
        Some(spool) => {
            write_atomically_with(path, |out| spool.finish(out, metadata, path).map(|_| ()))
        }
        None => Ok(()),
    });
    all_ranks_ok(comm, written, "write the model file")
}
