//! The precision a benchmark measures in (`tessera-bench --precision f32|tf32|bf16`): full f32,
//! f32 with TF32 matrix products (a CUDA handle option), or the bf16 mixed-precision policy
//! (`tessera_nn::precision::Precision::BF16`: linear layers compute in bf16, master weights and
//! everything else stay f32). Records measured in anything but f32 carry it
//! ([`crate::bench::record::Record::precision`]), and the lifecycle report gives each
//! backend-and-precision pair its own column ([`column()`]).

use clap::ValueEnum;
use tessera_nn::precision::Precision;

/// How a benchmark computes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum BenchPrecision {
    /// Full f32 (TF32 off, as it is by default).
    #[default]
    F32,
    /// f32 tensors with matrix products on TF32 tensor cores (CUDA's cuBLAS only).
    Tf32,
    /// The bf16 mixed-precision policy of the models (`Precision::BF16`).
    Bf16,
}

impl BenchPrecision {
    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            BenchPrecision::F32 => "f32",
            BenchPrecision::Tf32 => "tf32",
            BenchPrecision::Bf16 => "bf16",
        }
    }

    /// What records carry in [`crate::bench::record::Record::precision`]: None for f32, so
    /// that f32 records read as they always did.
    pub fn record_label(self) -> Option<&'static str> {
        match self {
            BenchPrecision::F32 => None,
            other => Some(other.name()),
        }
    }

    /// The models' precision policy.
    pub fn model_precision(self) -> Precision {
        match self {
            BenchPrecision::F32 | BenchPrecision::Tf32 => Precision::F32,
            BenchPrecision::Bf16 => Precision::BF16,
        }
    }

    /// Whether the backend handle lets f32 matrix products use TF32.
    pub fn allows_tf32(self) -> bool {
        self == BenchPrecision::Tf32
    }
}

/// The precision a suite with a peer (`gpt`, `decode`) runs both sides in, given as the
/// suite's own `--precision` so that the peer script receives it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PeerPrecision {
    /// Everything in f32.
    F32,
    /// bf16 (what that is, mixed precision or bf16 weights, each suite says).
    Bf16,
}

impl PeerPrecision {
    /// The word on the command line (and in the peer's records).
    pub fn word(self) -> &'static str {
        match self {
            PeerPrecision::F32 => "f32",
            PeerPrecision::Bf16 => "bf16",
        }
    }

    /// The models' precision policy.
    pub fn model_precision(self) -> Precision {
        match self {
            PeerPrecision::F32 => Precision::F32,
            PeerPrecision::Bf16 => Precision::BF16,
        }
    }
}

/// The report column of records of `backend` measured in `precision` (a record's label, None
/// for f32): `cuda`, `cuda tf32`, `cuda bf16`.
pub fn column(backend: &str, precision: Option<&str>) -> String {
    match precision {
        None | Some("f32") => backend.to_string(),
        Some(p) => format!("{backend} {p}"),
    }
}

/// The order of columns of one backend: f32, then TF32, bf16, f16, anything else.
pub fn column_rank(precision: Option<&str>) -> usize {
    match precision {
        None | Some("f32") => 0,
        Some("tf32") => 1,
        Some("bf16") => 2,
        Some("f16") => 3,
        Some(_) => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_records_keep_the_plain_backend_column() {
        assert_eq!(BenchPrecision::F32.record_label(), None);
        assert_eq!(column("cuda", None), "cuda");
        assert_eq!(column("cuda", Some("f32")), "cuda");
        assert_eq!(column("cuda", Some("tf32")), "cuda tf32");
        assert_eq!(column("cpu", Some("bf16")), "cpu bf16");
    }

    #[test]
    fn precisions_map_to_policies_and_handle_options() {
        assert_eq!(BenchPrecision::Bf16.model_precision(), Precision::BF16);
        assert_eq!(BenchPrecision::Tf32.model_precision(), Precision::F32);
        assert!(BenchPrecision::Tf32.allows_tf32());
        assert!(!BenchPrecision::Bf16.allows_tf32() && !BenchPrecision::F32.allows_tf32());
        assert_eq!(BenchPrecision::Tf32.record_label(), Some("tf32"));
        assert!(column_rank(None) < column_rank(Some("tf32")));
        assert!(column_rank(Some("tf32")) < column_rank(Some("bf16")));
    }
}
