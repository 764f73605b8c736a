//! [`TextCorpus`]: the text a language model trains on, read from a file or a folder of files.

use std::path::{Path, PathBuf};
use tessera_core::{Error, Result};

/// Where Debian's `fortunes` package installs its plain-text fortune files (about 2.6 MB of
/// quotes, jokes and aphorisms separated by `%` lines): the default corpus of `train --model gpt`.
pub const FORTUNES_DIR: &str = "/usr/share/games/fortunes";

/// What to do when the default corpus is missing.
pub const FORTUNES_HINT: &str =
    "install it with `apt-get install fortunes`, or pass --data with any text file or folder";

/// The UTF-8 text of one file or of every regular file of a folder (recursively, in name
/// order, concatenated). Symbolic links are skipped (Debian's `*.u8` links repeat files) and so
/// are files that are not UTF-8 (the `*.dat` indexes beside fortune files); both are listed.
#[derive(Clone, Debug, PartialEq)]
pub struct TextCorpus {
    /// The text.
    pub text: String,
    /// The files read, in order.
    pub files: Vec<PathBuf>,
    /// Files skipped because they are not UTF-8 text.
    pub skipped: Vec<PathBuf>,
}

impl TextCorpus {
    /// Reads `path` (a file or a folder). A missing path, or one without any text, is
    /// [`Error::MissingData`] whose hint names the `fortunes` package when `path` is
    /// [`FORTUNES_DIR`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let hint = |what: &str| {
            if path == Path::new(FORTUNES_DIR) {
                format!("{what}; {FORTUNES_HINT}")
            } else {
                format!("{what}; pass --data with a UTF-8 text file or a folder of them")
            }
        };
        if !path.exists() {
            return Err(Error::MissingData {
                path: path.to_path_buf(),
                hint: hint("it does not exist"),
            });
        }
        let mut files = Vec::new();
        collect_files(path, &mut files)?;
        let mut corpus = TextCorpus {
            text: String::new(),
            files: Vec::new(),
            skipped: Vec::new(),
        };
        for file in files {
            let bytes = std::fs::read(&file).map_err(|e| Error::io(&file, e))?;
            match String::from_utf8(bytes) {
                Ok(text) => {
                    corpus.text.push_str(&text);
                    corpus.files.push(file);
                }
                Err(_) => corpus.skipped.push(file),
            }
        }
        if corpus.text.is_empty() {
            return Err(Error::MissingData {
                path: path.to_path_buf(),
                hint: hint("no UTF-8 text found there"),
            });
        }
        Ok(corpus)
    }
}

/// Every regular file under `path` (itself, for a file), in name order; symlinks skipped.
fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_file() {
        out.push(path.to_path_buf());
    } else if meta.is_dir() {
        let mut entries = std::fs::read_dir(path)
            .map_err(|e| Error::io(path, e))?
            .map(|e| e.map(|e| e.path()).map_err(|err| Error::io(path, err)))
            .collect::<Result<Vec<_>>>()?;
        entries.sort();
        for entry in entries {
            collect_files(&entry, out)?;
        }
    }
    Ok(())
}
