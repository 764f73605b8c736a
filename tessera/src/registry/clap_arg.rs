//! `--backend NAME` for clap programs (feature `clap`): the registry's names as the argument's
//! possible values, each with its help line, and the registry's errors as clap's.

use super::{enabled, lookup_among, BackendEntry};
use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use std::ffi::OsStr;

/// The clap value parser of a backend name, [`value_parser`].
#[derive(Clone, Copy, Debug)]
pub struct BackendParser {
    with_checked: bool,
}

/// A clap value parser of every compiled-in backend's name, for an argument of type
/// [`BackendEntry`] (or `Vec<BackendEntry>`):
///
/// ```
/// use clap::Parser;
/// use tessera::registry::{self, BackendEntry};
///
/// #[derive(Debug, Parser)]
/// struct Args {
///     /// Compute backend.
///     #[arg(long, default_value = "cpu", value_parser = registry::value_parser())]
///     backend: BackendEntry,
/// }
///
/// let args = Args::try_parse_from(["train", "--backend", "checked-cpu"]).unwrap();
/// assert_eq!(args.backend.name(), "checked-cpu");
/// let err = Args::try_parse_from(["train", "--backend", "tpu"]).unwrap_err().to_string();
/// assert!(err.contains("unknown backend `tpu`; available: cpu"), "{err}");
/// ```
///
/// The help lists the compiled-in names with their help lines; an unknown name is an error
/// listing them, and a backend this build lacks an error naming the features to enable.
pub fn value_parser() -> BackendParser {
    BackendParser { with_checked: true }
}

impl BackendParser {
    /// The same parser without the checked backends (benchmarks measure speed, which a checked
    /// backend, running every op twice, does not have).
    pub fn without_checked(self) -> BackendParser {
        BackendParser {
            with_checked: false,
        }
    }
}

impl TypedValueParser for BackendParser {
    type Value = BackendEntry;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<BackendEntry, clap::Error> {
        let Some(name) = value.to_str() else {
            return Err(clap::Error::new(ErrorKind::InvalidUtf8).with_cmd(cmd));
        };
        lookup_among(name, self.with_checked).map_err(|e| {
            let arg = arg.map_or_else(|| "--backend".to_string(), ToString::to_string);
            clap::Error::raw(
                ErrorKind::InvalidValue,
                format!("invalid value '{name}' for '{arg}': {e}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        let accepted = enabled().filter(|b| self.with_checked || !b.is_checked());
        Some(Box::new(
            accepted.map(|b| PossibleValue::new(b.name()).help(b.about())),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct One {
        #[arg(long, default_value = "cpu", value_parser = value_parser())]
        backend: BackendEntry,
    }

    #[derive(Debug, Parser)]
    struct Many {
        #[arg(
            long = "backend",
            value_delimiter = ',',
            value_parser = value_parser().without_checked()
        )]
        backends: Vec<BackendEntry>,
    }

    #[test]
    fn names_parse_to_their_entries_with_the_default_and_lists() {
        let cpu = super::super::lookup("cpu").unwrap();
        assert_eq!(One::try_parse_from(["p"]).unwrap().backend, cpu);
        assert_eq!(
            One::try_parse_from(["p", "--backend", "cpu"])
                .unwrap()
                .backend,
            cpu
        );
        let many = Many::try_parse_from(["p", "--backend", "cpu,cpu"]).unwrap();
        assert_eq!(many.backends, [cpu, cpu]);
    }

    #[test]
    fn errors_list_the_names_or_name_the_feature() {
        let err = One::try_parse_from(["p", "--backend", "tpu"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidValue);
        let text = err.to_string();
        let names: Vec<&str> = enabled().map(BackendEntry::name).collect();
        assert!(
            text.contains(&format!(
                "invalid value 'tpu' for '--backend <BACKEND>': unknown backend `tpu`; \
                 available: {}",
                names.join(", ")
            )),
            "{text}"
        );
        if let Some(absent) = super::super::all().find(|b| !b.is_enabled()) {
            let text = One::try_parse_from(["p", "--backend", absent.name()])
                .unwrap_err()
                .to_string();
            assert!(text.contains("not in this build"), "{text}");
            for feature in absent.missing_features() {
                assert!(text.contains(&format!("`{feature}`")), "{text}");
            }
        }
        if cfg!(feature = "checked") {
            let text = Many::try_parse_from(["p", "--backend", "cpu,checked-cpu"])
                .unwrap_err()
                .to_string();
            assert!(text.contains("is a checked backend"), "{text}");
        }
    }

    #[test]
    fn the_help_lists_the_compiled_in_names_with_their_help() {
        use clap::CommandFactory;
        let help = One::command().render_long_help().to_string();
        for backend in enabled() {
            assert!(help.contains(backend.name()), "{help}");
            assert!(help.contains(backend.about()), "{help}");
        }
        let short = Many::command().render_help().to_string();
        assert!(short.contains("[possible values: cpu"), "{short}");
        assert!(!short.contains("checked-"), "{short}");
    }
}
