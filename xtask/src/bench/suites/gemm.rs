//! The `gemm` suite: C = A·B for square n×n matrices of standard-normal values, f32 and f64,
//! with the operand layouts a training step multiplies: `nn` (A·B), `nt` (A·Bᵀ, a transposed
//! view, as `x·Wᵀ` in a linear layer) and `tn` (Aᵀ·B, as the weight gradient `xᵀ·dy`). The
//! transposed operand is a view, never copied, on every side.

use clap::{Args, ValueEnum};
use tessera_core::{Backend, DType, Tensor};

use crate::bench::record::Record;
use crate::bench::timing::Protocol;

/// The suite's name.
pub const NAME: &str = "gemm";

/// Arguments of the `gemm` suite.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct GemmArgs {
    /// Matrix sizes n (comma-separated): each run multiplies two n×n f32 matrices.
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = [256, 512, 1024, 2048, 4096])]
    pub sizes: Vec<usize>,
    /// Timed repetitions per size [default: enough for about 1.5 s per size, at least 5].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub reps: Option<u64>,
    /// Element types (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1.., default_values_t = [GemmType::F32])]
    pub dtypes: Vec<GemmType>,
    /// Operand layouts (comma-separated): nn = A·B, nt = A·Bᵀ, tn = Aᵀ·B.
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1.., default_values_t = [GemmLayout::Nn])]
    pub layouts: Vec<GemmLayout>,
}

/// An element type of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GemmType {
    /// sgemm.
    F32,
    /// dgemm.
    F64,
}

impl GemmType {
    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            GemmType::F32 => "f32",
            GemmType::F64 => "f64",
        }
    }

    fn dtype(self) -> DType {
        match self {
            GemmType::F32 => DType::F32,
            GemmType::F64 => DType::F64,
        }
    }
}

/// Which operands are transposed views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GemmLayout {
    /// A·B.
    Nn,
    /// A·Bᵀ.
    Nt,
    /// Aᵀ·B.
    Tn,
}

impl GemmLayout {
    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            GemmLayout::Nn => "nn",
            GemmLayout::Nt => "nt",
            GemmLayout::Tn => "tn",
        }
    }
}

/// The record variant of a type and layout: `None` for the classic f32 A·B (so its records
/// keep their case keys), else e.g. `"f64 nt"`.
pub fn variant(dtype: GemmType, layout: GemmLayout) -> Option<String> {
    match (dtype, layout) {
        (GemmType::F32, GemmLayout::Nn) => None,
        _ => Some(format!("{} {}", dtype.name(), layout.name())),
    }
}

impl GemmArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        let sizes: Vec<String> = self.sizes.iter().map(usize::to_string).collect();
        let mut args = vec!["--sizes".to_string(), sizes.join(",")];
        if let Some(reps) = self.reps {
            args.extend(["--reps".to_string(), reps.to_string()]);
        }
        if self.dtypes != [GemmType::F32] {
            let names: Vec<&str> = self.dtypes.iter().map(|d| d.name()).collect();
            args.extend(["--dtypes".to_string(), names.join(",")]);
        }
        if self.layouts != [GemmLayout::Nn] {
            let names: Vec<&str> = self.layouts.iter().map(|l| l.name()).collect();
            args.extend(["--layouts".to_string(), names.join(",")]);
        }
        args
    }
}

/// Floating-point operations of one n×n by n×n product: n³ multiply-adds.
pub fn flops(n: usize) -> f64 {
    2.0 * (n as f64).powi(3)
}

/// Measures `a.matmul(&b)` on `dev` for each type, layout and size of `args`, emitting one
/// record per case. The inputs (and their transposed views) are created, and the backend
/// synchronised, before the clock starts; each timed run is the product plus a `synchronize`.
pub fn measure<B: Backend>(
    dev: &B,
    args: &GemmArgs,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> tessera_core::Result<()> {
    for &dtype in &args.dtypes {
        for &layout in &args.layouts {
            for &n in &args.sizes {
                let a = Tensor::<B>::randn([n, n], dtype.dtype(), 1, dev)?;
                let b = Tensor::<B>::randn([n, n], dtype.dtype(), 2, dev)?;
                let (a, b) = match layout {
                    GemmLayout::Nn => (a, b),
                    GemmLayout::Nt => (a, b.t()?),
                    GemmLayout::Tn => (a.t()?, b),
                };
                dev.synchronize()?;
                let timing = protocol.measure(args.reps.map(|r| r as usize), || {
                    let c = a.matmul(&b)?;
                    dev.synchronize()?;
                    Ok::<_, tessera_core::Error>(c)
                })?;
                let mut record =
                    Record::new(NAME, "tessera", dev.name(), n, &timing).with_flops(flops(n));
                record.variant = variant(dtype, layout);
                emit(record);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::suites::SuiteCommand;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        suite: SuiteCommand,
    }

    fn parse(words: &[&str]) -> SuiteCommand {
        Cli::try_parse_from(std::iter::once("bench").chain(words.iter().copied()))
            .unwrap()
            .suite
    }

    #[test]
    fn defaults_are_the_five_standard_sizes_and_automatic_reps() {
        let SuiteCommand::Gemm(args) = parse(&["gemm"]) else {
            panic!("not the gemm suite");
        };
        assert_eq!(args.sizes, vec![256, 512, 1024, 2048, 4096]);
        assert_eq!(args.reps, None);
        assert_eq!(
            (args.dtypes, args.layouts),
            (vec![GemmType::F32], vec![GemmLayout::Nn])
        );
    }

    #[test]
    fn types_and_layouts_round_trip_and_name_the_variant() {
        let cmd = parse(&[
            "gemm",
            "--sizes",
            "8",
            "--dtypes",
            "f32,f64",
            "--layouts",
            "nt,tn",
        ]);
        let words = cmd.to_cli_args();
        assert_eq!(
            words,
            [
                "gemm",
                "--sizes",
                "8",
                "--dtypes",
                "f32,f64",
                "--layouts",
                "nt,tn"
            ]
        );
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        assert_eq!(parse(&words), cmd);
        assert_eq!(variant(GemmType::F32, GemmLayout::Nn), None);
        assert_eq!(
            variant(GemmType::F64, GemmLayout::Nt).as_deref(),
            Some("f64 nt")
        );
    }

    #[test]
    fn every_type_and_layout_measures_on_the_cpu() {
        let SuiteCommand::Gemm(args) = parse(&[
            "gemm",
            "--sizes",
            "3",
            "--reps",
            "1",
            "--dtypes",
            "f32,f64",
            "--layouts",
            "nn,nt,tn",
        ]) else {
            panic!("not the gemm suite");
        };
        let quick = Protocol::quick();
        let mut variants = Vec::new();
        measure(&tessera_cpu::Cpu::new(), &args, &quick, &mut |r| {
            variants.push(r.variant)
        })
        .unwrap();
        let names: Vec<&str> = variants
            .iter()
            .map(|v| v.as_deref().unwrap_or("-"))
            .collect();
        assert_eq!(
            names,
            ["-", "f32 nt", "f32 tn", "f64 nn", "f64 nt", "f64 tn"]
        );
    }

    #[test]
    fn cli_args_round_trip() {
        let cmd = parse(&["gemm", "--sizes", "64,128", "--reps", "3"]);
        let words = cmd.to_cli_args();
        assert_eq!(words, ["gemm", "--sizes", "64,128", "--reps", "3"]);
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        assert_eq!(parse(&words), cmd);
    }

    #[test]
    fn zero_reps_is_rejected() {
        let r = Cli::try_parse_from(["bench", "gemm", "--reps", "0"]);
        assert!(r.is_err());
    }

    #[test]
    fn flops_counts_a_multiply_add_per_inner_step() {
        assert_eq!(flops(2), 16.0);
    }
}
