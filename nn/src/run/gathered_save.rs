//! The ordinary one-file checkpoint written from ranks whose optimizer state is spread over
//! them, without any rank holding the whole state: each optimizer hands its state over in parts
//! ([`Optimizer::visit_consolidated_state`]: one bucket of a
//! [`crate::distributed::ShardedOptimizer`] at a time, gathered to rank 0), a level-3 model's
//! units a unit at a time, and rank 0 spools each part to disk as it comes
//! ([`crate::checkpoint::SpooledSafetensors`]).

use super::gathered_model::visit_model_on_rank0;
use super::run_dir::RunDir;
use super::snapshot::{
    check_group_names, head_metadata, write_run_config, MODEL_PREFIX, OPTIM_PREFIX,
};
use crate::checkpoint::SpooledSafetensors;
use crate::distributed::{all_ranks_ok, Communicator, ShardedUnits};
use crate::module::Module;
use crate::optim::Optimizer;
use crate::Result;
use serde_json::Value;
use std::path::PathBuf;
use tessera_core::Backend;

/// Writes the checkpoint of `step` that [`super::save_checkpoint`] writes for the same state
/// (one file, the same tensors and metadata), from every rank at once (a collective): the
/// model from rank 0's copy, a level-3 model's `units` gathered to rank 0 a unit at a time
/// (released or held whole there, [`ShardedUnits::visit_whole_on`]), each optimizer's state a
/// part at a time ([`Optimizer::visit_consolidated_state`]), so that a rank holds at most one
/// unit of parameters and one bucket of gathered state instead of all of them
/// ([`Optimizer::prepare_checkpoint`] gathers everything on every rank). Rank 0 writes; when
/// any rank fails, every rank returns an error and no manifest is written. Returns the
/// checkpoint's path.
#[allow(clippy::too_many_arguments)]
pub fn save_gathered_checkpoint<B, M>(
    dir: &RunDir,
    step: u64,
    model: &M,
    units: Option<&ShardedUnits<B>>,
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
    let path = dir.checkpoint_path(step);
    let saved = Saved {
        model,
        units,
        optimizers,
        groups: &names,
    };
    let written = write_gathered(dir, step, &saved, config, state, comm);
    all_ranks_ok(comm, written, "write its part of the checkpoint").map(|()| path)
}

/// What a checkpoint saves: the model (its units, at level 3) and the optimizers by group name
/// (`groups`: their names, checked).
struct Saved<'a, B: Backend, M: ?Sized> {
    model: &'a M,
    units: Option<&'a ShardedUnits<B>>,
    optimizers: &'a [(&'a str, &'a dyn Optimizer<B>)],
    groups: &'a [&'a str],
}

/// [`save_gathered_checkpoint`] on this rank, before the ranks agree on the outcome.
fn write_gathered<B, M>(
    dir: &RunDir,
    step: u64,
    saved: &Saved<'_, B, M>,
    config: &Value,
    state: &Value,
    comm: &dyn Communicator<B>,
) -> Result<()>
where
    B: Backend,
    M: Module<B> + ?Sized,
{
    // Rank 0 spools; a failure to spool stops the spooling, not the collectives.
    let mut spool = (comm.rank() == 0).then(|| SpooledSafetensors::new(dir.checkpoints_dir()));
    let mut failed = None;
    let model_visited =
        visit_model_on_rank0(
            saved.model,
            saved.units,
            comm,
            &mut |name, t| match spool.as_mut() {
                Some(out) => out.add(&format!("{MODEL_PREFIX}{name}"), t),
                None => Ok(()),
            },
        );
    if let Err(e) = model_visited {
        spool = None;
        failed = Some(e);
    }
    for (group, optimizer) in saved.optimizers {
        let visited = optimizer.visit_consolidated_state(&mut |part| {
            let Some(out) = spool.as_mut() else {
                return Ok(());
            };
            for (key, tensor) in part {
                if let Err(e) = out.add(&format!("{OPTIM_PREFIX}{group}.{key}"), &tensor) {
                    spool = None;
                    return Err(e);
                }
            }
            Ok(())
        });
        if let Err(e) = visited {
            failed.get_or_insert(e);
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let Some(spool) = spool else {
        return Ok(());
    };
    let meta = head_metadata(step, saved.model, config, state, saved.groups);
    write_run_config(dir, config)?;
    let path = dir.checkpoint_path(step);
    dir.commit_with(step, |out| spool.finish(out, &meta, &path).map(|_| ()))?;
    Ok(())
}
