//! The `gemm` suite: C = A·B for square n×n f32 matrices of standard-normal values.

use clap::Args;
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
}

impl GemmArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        let sizes: Vec<String> = self.sizes.iter().map(usize::to_string).collect();
        let mut args = vec!["--sizes".to_string(), sizes.join(",")];
        if let Some(reps) = self.reps {
            args.extend(["--reps".to_string(), reps.to_string()]);
        }
        args
    }
}

/// Floating-point operations of one n×n by n×n product: n³ multiply-adds.
pub fn flops(n: usize) -> f64 {
    2.0 * (n as f64).powi(3)
}

/// Measures `a.matmul(&b)` on `dev` for each size of `args`, emitting one record per size. The
/// inputs are created (and the backend synchronised) before the clock starts; each timed run is
/// the product plus a `synchronize`.
pub fn measure<B: Backend>(
    dev: &B,
    args: &GemmArgs,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> tessera_core::Result<()> {
    for &n in &args.sizes {
        let a = Tensor::<B>::randn([n, n], DType::F32, 1, dev)?;
        let b = Tensor::<B>::randn([n, n], DType::F32, 2, dev)?;
        dev.synchronize()?;
        let timing = protocol.measure(args.reps.map(|r| r as usize), || {
            let c = a.matmul(&b)?;
            dev.synchronize()?;
            Ok::<_, tessera_core::Error>(c)
        })?;
        emit(Record::new(NAME, "tessera", dev.name(), n, &timing).with_flops(flops(n)));
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
