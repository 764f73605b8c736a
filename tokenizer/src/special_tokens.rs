//! [`SpecialTokens`]: the beginning- and end-of-text tokens a model folder names.

use serde_json::Value;
use std::path::Path;
use tessera_core::{Error, Result};

/// The file beside `tokenizer.json` that names the special tokens.
pub const TOKENIZER_CONFIG_FILE: &str = "tokenizer_config.json";

/// The special tokens of a model folder, as strings and ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// The beginning-of-text token and its id.
    pub bos: Option<(String, u32)>,
    /// The end-of-text token and its id.
    pub eos: Option<(String, u32)>,
}

impl SpecialTokens {
    /// Reads `dir/tokenizer_config.json`'s `bos_token` and `eos_token` (a string, or an object
    /// with `content`), resolved to ids by `tokenizer`; nothing when the file is absent. A
    /// named token missing from the vocabulary is [`Error::Format`].
    pub(crate) fn read(dir: &Path, tokenizer: &tokenizers::Tokenizer) -> Result<Self> {
        let path = dir.join(TOKENIZER_CONFIG_FILE);
        if !path.exists() {
            return Ok(SpecialTokens::default());
        }
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let config: Value = serde_json::from_str(&text)
            .map_err(|e| Error::format(&path, format!("not valid JSON: {e}")))?;
        let token = |key: &str| -> Result<Option<(String, u32)>> {
            let content = match config.get(key) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Object(o)) => match o.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    _ => return Err(Error::format(&path, format!("`{key}` has no `content`"))),
                },
                None | Some(Value::Null) => return Ok(None),
                Some(other) => {
                    return Err(Error::format(
                        &path,
                        format!("`{key}` is not a token: {other}"),
                    ))
                }
            };
            let id = tokenizer.token_to_id(&content).ok_or_else(|| {
                Error::format(
                    &path,
                    format!("`{key}` \"{content}\" is not in the tokenizer's vocabulary"),
                )
            })?;
            Ok(Some((content, id)))
        };
        Ok(SpecialTokens {
            bos: token("bos_token")?,
            eos: token("eos_token")?,
        })
    }

    /// The id of the beginning-of-text token.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos.as_ref().map(|(_, id)| *id)
    }

    /// The id of the end-of-text token.
    pub fn eos_id(&self) -> Option<u32> {
        self.eos.as_ref().map(|(_, id)| *id)
    }
}
