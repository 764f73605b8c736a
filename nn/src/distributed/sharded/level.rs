//! [`ShardLevel`]: how much of the training state each rank keeps (ZeRO's stages).

use tessera_core::{Error, Result};

/// How much of the training state a data-parallel rank keeps whole, following ZeRO's stages
/// (Rajbhandari et al., 2020) and PyTorch FSDP's sharding strategies. With `N` ranks, `P`
/// parameter bytes and AdamW in f32 (state `2P`), the training state per rank is:
///
/// | level | kept whole | sharded (1/N each) | per rank | communication per step |
/// | --- | --- | --- | --- | --- |
/// | 0, [`Replicated`](ShardLevel::Replicated) | parameters, gradients, optimizer state | — | `4P` | all-reduce of the gradients |
/// | 1, [`OptimizerState`](ShardLevel::OptimizerState) | parameters, gradients | optimizer state (and the parameters it updates) | `2P + 3P/N` | all-reduce of the gradients, all-gather of the parameters |
/// | 2, [`Gradients`](ShardLevel::Gradients) | parameters, and the gradients until they are reduced after backward | optimizer state, reduced gradients | `2P + 3P/N` at the end of backward, `P + 4P/N` between steps | reduce-scatter of the gradients, all-gather of the parameters |
/// | 3, [`Parameters`](ShardLevel::Parameters) | the parameters outside units, one unit's at a time | everything of level 2, and each unit's parameters between uses | `4P/N` + the rest's `2P` + one unit's parameters and gradients | all-gather per unit in forward and backward, reduce-scatter per unit, one extra forward pass |
///
/// Level 2's peak equals level 1's here because backward accumulates the whole gradients
/// before they are reduced (ZeRO-2 proper reduces buckets during backward, through hooks this
/// framework's autograd does not have yet); level 3 reduces each unit's gradients during
/// backward ([`crate::distributed::ShardedUnits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShardLevel {
    /// Level 0: plain data parallelism, every rank keeps everything.
    Replicated,
    /// Level 1: each rank keeps and updates the optimizer state of 1/N of the parameters,
    /// then the updated parameters are all-gathered.
    OptimizerState,
    /// Level 2: level 1, with the gradients reduce-scattered instead of all-reduced (each rank
    /// receives the mean of its share only, and drops the whole gradients).
    Gradients,
    /// Level 3: level 2, with the parameters of units (e.g. transformer blocks) sharded between
    /// uses as well: [`crate::distributed::ShardedOptimizer::with_units`] and
    /// [`crate::distributed::ShardedUnits`] ([`crate::distributed::ShardedOptimizer::new`]
    /// refuses it with [`Error::InvalidArgument`]).
    Parameters,
}

impl ShardLevel {
    /// The level of a number: 0, 1, 2 or 3.
    pub fn from_number(level: usize) -> Result<ShardLevel> {
        match level {
            0 => Ok(ShardLevel::Replicated),
            1 => Ok(ShardLevel::OptimizerState),
            2 => Ok(ShardLevel::Gradients),
            3 => Ok(ShardLevel::Parameters),
            other => Err(Error::InvalidArgument {
                op: "ShardLevel::from_number",
                msg: format!("sharding levels are 0, 1, 2 and 3, got {other}"),
            }),
        }
    }

    /// The level's number (0 to 3).
    pub fn number(self) -> usize {
        match self {
            ShardLevel::Replicated => 0,
            ShardLevel::OptimizerState => 1,
            ShardLevel::Gradients => 2,
            ShardLevel::Parameters => 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_others_are_refused() {
        for n in 0..4 {
            assert_eq!(ShardLevel::from_number(n).unwrap().number(), n);
        }
        assert!(ShardLevel::from_number(4).is_err());
        assert!(ShardLevel::Replicated < ShardLevel::Gradients);
    }
}
