//! Where the data suites (`prep`, `eval`) read Fashion-MNIST from.

use std::path::PathBuf;

use clap::Args;

/// The data-set folder argument shared by the data suites.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct DataArgs {
    /// Folder with the (Fashion-)MNIST IDX files.
    #[arg(long, default_value = tessera_nn::data::FASHION_MNIST_DIR)]
    pub data: PathBuf,
    /// Timed repetitions [default: enough for about 3 s, at least 3].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub reps: Option<u64>,
}

impl DataArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        let mut args = vec!["--data".to_string(), self.data.display().to_string()];
        if let Some(reps) = self.reps {
            args.extend(["--reps".to_string(), reps.to_string()]);
        }
        args
    }

    /// Why the data set cannot be read, or `None` when its folder exists.
    pub fn missing_reason(&self) -> Option<String> {
        (!self.data.is_dir()).then(|| {
            format!(
                "{} does not exist; {}",
                self.data.display(),
                tessera_nn::data::MISSING_DATA_HINT
            )
        })
    }
}
