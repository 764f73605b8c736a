//! Placeholders: a parameter value that is one zero broadcast to the parameter's shape, which
//! costs one element of memory. A released sharded unit's parameters hold them, and so do the
//! parameters a deferred build ([`tessera_core::Generator::deferred`]) has not given values yet.

use crate::distributed::ShardedUnits;
use crate::Module;
use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result, Shape, Tensor};

/// One zero of `like`'s dtype broadcast to `dims`.
pub(crate) fn placeholder<B: Backend>(dims: &[usize], like: &Tensor<B>) -> Result<Tensor<B>> {
    Tensor::zeros(Shape::scalar(), like.dtype(), like.backend())?.broadcast_to(dims.to_vec())
}

/// Whether `value` has more than one element and every one of them is the same stored element
/// (every stride zero): a placeholder, or any other tensor expanded from one element.
pub(crate) fn is_placeholder<B: Backend>(value: &Tensor<B>) -> bool {
    value.numel() > 1 && value.layout().strides().iter().all(|&s| s == 0)
}

/// One stored element of a tensor [`is_placeholder`] accepts, as a scalar tensor.
pub(crate) fn placeholder_element<B: Backend>(value: &Tensor<B>) -> Result<Tensor<B>> {
    let mut one = value.clone();
    for dim in 0..value.rank() as isize {
        one = one.narrow(dim, 0, 1)?;
    }
    one.reshape(Shape::scalar())?.contiguous()
}

/// An error naming the first of `params` (named `{prefix}{name}`) that holds a placeholder
/// instead of values, if any: what a deferred build's model answers when it is run, or its
/// shares are taken, before its values are given (`how` says how to give them).
pub(crate) fn check_have_values<'a, B: Backend>(
    params: impl IntoIterator<Item = (&'a String, &'a Var<B>)>,
    prefix: &str,
    op: &'static str,
    how: &str,
) -> Result<()> {
    match params.into_iter().find(|(_, v)| is_placeholder(&v.value())) {
        Some((name, var)) => Err(Error::InvalidArgument {
            op,
            msg: format!(
                "parameter {prefix}{name} of shape {:?} holds no values yet (a deferred build): \
                 {how}",
                var.dims()
            ),
        }),
        None => Ok(()),
    }
}

/// Checks, before a pass of a model made of blocks, that no block would run on placeholders:
/// when the model was built `deferred` and a block was not given its values yet (`init_how`
/// says how to give them). Blocks sharded through `units` and released are gathered by the
/// pass itself ([`ShardedUnits::run`], [`ShardedUnits::run_without_graph`]) and pass. `blocks`
/// yields each block's tensor-name prefix (with its trailing dot) and the block. Checked
/// before anything runs, so that a refused pass draws no dropout mask.
pub(crate) fn check_blocks_runnable<'a, B: Backend, M: Module<B> + 'a>(
    op: &'static str,
    deferred: bool,
    units: Option<&ShardedUnits<B>>,
    blocks: impl Iterator<Item = (String, &'a M)>,
    init_how: &str,
) -> Result<()> {
    if !deferred || units.is_some_and(|u| !u.is_held()) {
        return Ok(());
    }
    for (prefix, block) in blocks {
        let params = block.parameters();
        check_have_values(params.iter().map(|(n, v)| (n, v)), &prefix, op, init_how)?;
    }
    Ok(())
}
