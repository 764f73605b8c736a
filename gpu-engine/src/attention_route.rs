//! How a [`crate::Gpu`] handle computes scaled dot-product attention: with the scores
//! materialised (two batched matrix products on the handle's GEMM, cuBLAS on CUDA, around the
//! row kernels), the batch cut into chunks whose scores fit a memory bound, or with the fused
//! kernels (one work-group per row, no scores in memory). On an H200 the fused kernels took
//! 1-2 ms per call for a GPT-2-sized layer (batch 8, 12 heads, 256 positions), about ten times
//! the materialised route's time, so they serve decoding (one query per sequence), where one
//! launch beats a dozen.

use tessera_core::{Error, Result};

/// Environment variable choosing the default route: `auto`, `fused` or `materialized`.
pub const ATTENTION_ENV_VAR: &str = "TESSERA_GPU_ATTENTION";

/// Default bound of one materialised chunk: 2^25 score elements (128 MiB in f32 per temporary).
pub const DEFAULT_CHUNK_SCORES: usize = 1 << 25;

/// The attention route of a handle ([`crate::Gpu::with_attention`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttentionRoute {
    /// Fused for a single query per sequence (decoding), materialised in chunks of
    /// [`DEFAULT_CHUNK_SCORES`] otherwise.
    #[default]
    Auto,
    /// Always the fused kernels.
    Fused,
    /// Always materialised, at most `chunk_scores` score elements per chunk (at least one
    /// batch element per chunk, whatever its size).
    Materialized {
        /// The most `[L, S]` score elements one chunk of batch elements may hold.
        chunk_scores: usize,
    },
}

/// What one call does: the fused kernels, or the materialised route over chunks of batch
/// elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AttentionPlan {
    /// The fused kernels over the whole batch.
    Fused,
    /// The composite over each range of flattened batch elements, in order.
    Chunks(Vec<std::ops::Range<usize>>),
}

impl AttentionRoute {
    /// The route `TESSERA_GPU_ATTENTION` names (`auto` when unset).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the variable and the accepted words.
    pub fn from_env() -> Result<Self> {
        match std::env::var(ATTENTION_ENV_VAR) {
            Err(_) => Ok(AttentionRoute::Auto),
            Ok(word) => Self::parse(&word).ok_or_else(|| Error::InvalidArgument {
                op: "attention route",
                msg: format!("{ATTENTION_ENV_VAR}={word:?}: expected auto, fused or materialized"),
            }),
        }
    }

    /// `auto`, `fused` or `materialized` (the default chunk bound), case-insensitive.
    pub fn parse(word: &str) -> Option<Self> {
        match word.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(AttentionRoute::Auto),
            "fused" => Some(AttentionRoute::Fused),
            "materialized" | "materialised" => Some(AttentionRoute::Materialized {
                chunk_scores: DEFAULT_CHUNK_SCORES,
            }),
            _ => None,
        }
    }

    /// The plan for `batch` sequences of `l` queries over `s` keys.
    pub(crate) fn plan(self, batch: usize, l: usize, s: usize) -> AttentionPlan {
        let chunk_scores = match self {
            AttentionRoute::Fused => return AttentionPlan::Fused,
            AttentionRoute::Auto if l == 1 => return AttentionPlan::Fused,
            AttentionRoute::Auto => DEFAULT_CHUNK_SCORES,
            AttentionRoute::Materialized { chunk_scores } => chunk_scores,
        };
        let per_element = l.saturating_mul(s).max(1);
        let step = (chunk_scores / per_element).clamp(1, batch.max(1));
        let chunks = (0..batch)
            .step_by(step)
            .map(|start| start..(start + step).min(batch))
            .collect();
        AttentionPlan::Chunks(chunks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_fuses_decoding_and_materialises_the_rest_in_one_chunk_when_it_fits() {
        assert_eq!(AttentionRoute::Auto.plan(12, 1, 256), AttentionPlan::Fused);
        let one_chunk: Vec<std::ops::Range<usize>> = std::iter::once(0..96).collect();
        assert_eq!(
            AttentionRoute::Auto.plan(96, 256, 256),
            AttentionPlan::Chunks(one_chunk)
        );
        assert_eq!(
            AttentionRoute::Fused.plan(96, 256, 256),
            AttentionPlan::Fused
        );
    }

    #[test]
    fn chunks_cover_the_batch_in_order_within_the_bound() {
        for (batch, l, s, bound) in [
            (10, 4, 5, 40),
            (10, 4, 5, 41),
            (7, 3, 3, 1),
            (5, 2, 2, 1000),
        ] {
            let route = AttentionRoute::Materialized {
                chunk_scores: bound,
            };
            let AttentionPlan::Chunks(chunks) = route.plan(batch, l, s) else {
                panic!("not materialised");
            };
            let covered: Vec<usize> = chunks.iter().flat_map(|r| r.clone()).collect();
            assert_eq!(covered, (0..batch).collect::<Vec<_>>());
            for chunk in &chunks {
                assert!(!chunk.is_empty());
                assert!(
                    chunk.len() == 1 || chunk.len() * l * s <= bound,
                    "{chunk:?}"
                );
            }
        }
        // A 2^25 bound holds 128 sequences of 512 x 512 scores, not 129.
        let AttentionPlan::Chunks(chunks) = AttentionRoute::Auto.plan(300, 512, 512) else {
            panic!()
        };
        assert_eq!(chunks, vec![0..128, 128..256, 256..300]);
    }

    #[test]
    fn the_variable_takes_three_words() {
        assert_eq!(AttentionRoute::parse("Fused"), Some(AttentionRoute::Fused));
        assert_eq!(AttentionRoute::parse(" auto "), Some(AttentionRoute::Auto));
        assert_eq!(
            AttentionRoute::parse("materialized"),
            Some(AttentionRoute::Materialized {
                chunk_scores: DEFAULT_CHUNK_SCORES
            })
        );
        assert_eq!(AttentionRoute::parse("flash"), None);
    }
}
