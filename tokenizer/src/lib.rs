//! # tessera-tokenizer
//!
//! Subword tokenizers from Hugging Face `tokenizer.json` files (or GPT-2's original
//! `vocab.json` and `merges.txt`), through the `tokenizers`
//! crate (the library `transformers`' fast tokenizers run on, so the ids are the same):
//! [`Tokenizer::from_file`] / [`Tokenizer::from_folder`], [`Tokenizer::encode`],
//! [`Tokenizer::decode`], the special tokens a model folder names, and a [`TextStream`] that
//! turns generated ids into text as they come. Every failure is a typed
//! [`tessera_core::Error`] naming the file.
//!
//! ```no_run
//! # fn main() -> tessera_core::Result<()> {
//! let tokenizer = tessera_tokenizer::Tokenizer::from_folder("gpt2")?;
//! let ids = tokenizer.encode("Hello, world!", true)?;
//! assert_eq!(tokenizer.decode(&ids, true)?, "Hello, world!");
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod gpt2_files;
mod guard;
mod special_tokens;
mod stream;

pub use gpt2_files::{MERGES_FILE, VOCAB_FILE};
pub use special_tokens::SpecialTokens;
pub use stream::TextStream;

use guard::guarded;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tessera_core::{Error, Result};

/// The tokenizer file of a model folder.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// A loaded `tokenizer.json` and the special tokens its folder names.
#[derive(Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    special: SpecialTokens,
    path: PathBuf,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("path", &self.path)
            .field("vocab_size", &self.vocab_size())
            .field("special", &self.special)
            .finish()
    }
}

/// A `tokenizers` error as a Tessera error about `path`.
fn wrapped(path: &Path, what: &str, e: tokenizers::Error) -> Error {
    Error::Wrapped {
        context: format!("{what} with the tokenizer {}", path.display()),
        source: Arc::from(e),
    }
}

impl Tokenizer {
    /// Loads a `tokenizer.json` file. A missing file is [`Error::Io`], one that is not a
    /// tokenizer [`Error::Format`]; no special tokens are known (see
    /// [`Tokenizer::from_folder`]).
    ///
    /// Some damaged files make the `tokenizers` library panic, while reading them or on the
    /// first encode (a post-processor naming a special token it does not define): those
    /// panics are caught and the file is refused with [`Error::Format`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let inner = guarded(|| tokenizers::Tokenizer::from_bytes(&bytes))
            .map_err(|panic| Error::format(path, format!("the tokenizers library {panic}")))?
            .map_err(|e| Error::format(path, format!("not a tokenizer.json: {e}")))?;
        Self::probed(inner, path)
    }

    /// `inner`, loaded from `path`, once encoding with and without the post-processor has
    /// shown it usable (some files load but panic on every use).
    fn probed(inner: tokenizers::Tokenizer, path: &Path) -> Result<Self> {
        for add_special_tokens in [false, true] {
            let _probe = guarded(|| inner.encode("a b", add_special_tokens)).map_err(|panic| {
                Error::format(
                    path,
                    format!("the tokenizers library {panic} encoding text"),
                )
            })?;
        }
        Ok(Tokenizer {
            inner,
            special: SpecialTokens::default(),
            path: path.to_path_buf(),
        })
    }

    /// Loads `dir/tokenizer.json` (or, in a folder without one, GPT-2's `vocab.json` and
    /// `merges.txt`, as `GPT2TokenizerFast` builds them) and the beginning/end-of-text tokens
    /// `dir`'s `tokenizer_config.json` names (when that file exists). A folder with neither is
    /// [`Error::Io`] about the missing `tokenizer.json`.
    pub fn from_folder(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let json = dir.join(TOKENIZER_FILE);
        let mut tokenizer = if !json.exists() && gpt2_files::present(dir) {
            let vocab = dir.join(VOCAB_FILE);
            let inner = guarded(|| gpt2_files::load(dir)).map_err(|panic| {
                Error::format(&vocab, format!("the tokenizers library {panic}"))
            })??;
            Self::probed(inner, &vocab)?
        } else {
            Self::from_file(json)?
        };
        tokenizer.special = SpecialTokens::read(dir, &tokenizer.inner)?;
        Ok(tokenizer)
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tokens in the vocabulary, added (special) tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The special tokens known from the folder.
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    /// The id of a token string, if it is in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The ids of `text`; with `add_special_tokens`, the tokenizer's post-processor adds what
    /// the model expects (e.g. Llama's beginning-of-text token).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let encoding = guarded(|| self.inner.encode(text, add_special_tokens))
            .map_err(|panic| self.panicked(panic, "encoding text"))?
            .map_err(|e| wrapped(&self.path, "encoding text", e))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The text of `ids`; with `skip_special_tokens`, special tokens are left out. An id
    /// outside the vocabulary is [`Error::InvalidArgument`].
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.check_ids(ids)?;
        guarded(|| self.inner.decode(ids, skip_special_tokens))
            .map_err(|panic| self.panicked(panic, "decoding ids"))?
            .map_err(|e| wrapped(&self.path, "decoding ids", e))
    }

    /// A panic caught inside the `tokenizers` library while doing `what`.
    fn panicked(&self, panic: guard::Panicked, what: &str) -> Error {
        Error::format(&self.path, format!("the tokenizers library {panic} {what}"))
    }

    /// A stream that decodes ids one at a time (see [`TextStream`]).
    pub fn text_stream(&self, skip_special_tokens: bool) -> TextStream<'_> {
        TextStream::new(self, skip_special_tokens)
    }

    fn check_ids(&self, ids: &[u32]) -> Result<()> {
        let n = self.vocab_size();
        match ids.iter().find(|&&id| id as usize >= n) {
            Some(id) => Err(Error::InvalidArgument {
                op: "Tokenizer::decode",
                msg: format!("token id {id} is outside the vocabulary of {n}"),
            }),
            None => Ok(()),
        }
    }
}
