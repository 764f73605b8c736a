//! [`CharTokenizer`]: text to token ids one character (Unicode scalar value) at a time, over an
//! explicit vocabulary that is saved beside a model.

use crate::checkpoint::write_atomically;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use tessera_core::{Error, Result};

/// A character-level tokenizer: token `i` is the `i`-th character of the vocabulary.
///
/// ```
/// use tessera_nn::data::CharTokenizer;
/// let tok = CharTokenizer::from_text("hello world");
/// assert_eq!(tok.vocab_size(), 8); // " dehlorw"
/// let ids = tok.encode("low").unwrap();
/// assert_eq!(tok.decode(&ids).unwrap(), "low");
/// assert!(tok.encode("hi!").is_err()); // '!' and 'i' are not in the vocabulary
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CharTokenizer {
    chars: Vec<char>,
    index: HashMap<char, usize>,
}

fn vocab_error(msg: String) -> Error {
    Error::InvalidArgument {
        op: "CharTokenizer",
        msg,
    }
}

impl CharTokenizer {
    /// The vocabulary of every distinct character of `text`, in code-point order.
    pub fn from_text(text: &str) -> Self {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        Self::from_distinct(chars)
    }

    fn from_distinct(chars: Vec<char>) -> Self {
        let index = chars.iter().enumerate().map(|(i, &c)| (c, i)).collect();
        CharTokenizer { chars, index }
    }

    /// The vocabulary `chars`, in that order; errors on a repeated character or none.
    pub fn from_chars(chars: Vec<char>) -> Result<Self> {
        if chars.is_empty() {
            return Err(vocab_error("the vocabulary is empty".into()));
        }
        let tok = Self::from_distinct(chars);
        if tok.index.len() != tok.chars.len() {
            return Err(vocab_error("the vocabulary repeats a character".into()));
        }
        Ok(tok)
    }

    /// Tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.chars.len()
    }

    /// The characters, token 0 first.
    pub fn chars(&self) -> &[char] {
        &self.chars
    }

    /// The token ids of `text`; an error names the first character outside the vocabulary.
    pub fn encode(&self, text: &str) -> Result<Vec<usize>> {
        text.chars()
            .map(|c| {
                self.index.get(&c).copied().ok_or_else(|| {
                    vocab_error(format!("the character {c:?} is not in the vocabulary"))
                })
            })
            .collect()
    }

    /// The text of `ids`; an error names the first id outside the vocabulary.
    pub fn decode(&self, ids: &[usize]) -> Result<String> {
        ids.iter()
            .map(|&i| {
                self.chars.get(i).copied().ok_or_else(|| {
                    vocab_error(format!(
                        "token {i} is outside the vocabulary of {}",
                        self.chars.len()
                    ))
                })
            })
            .collect()
    }

    /// `{"kind": "char", "tokens": ["\n", " ", "!", ...]}`: one string per token, in order.
    pub fn to_json(&self) -> Value {
        let tokens: Vec<String> = self.chars.iter().map(|c| c.to_string()).collect();
        json!({ "kind": "char", "tokens": tokens })
    }

    /// Reads [`CharTokenizer::to_json`]'s form.
    pub fn from_json(value: &Value) -> Result<Self> {
        if value.get("kind").and_then(Value::as_str) != Some("char") {
            return Err(vocab_error("expected a vocabulary of kind \"char\"".into()));
        }
        let tokens = value
            .get("tokens")
            .and_then(Value::as_array)
            .ok_or_else(|| vocab_error("`tokens` must be a list of strings".into()))?;
        let chars = tokens
            .iter()
            .map(|t| {
                let s = t.as_str().unwrap_or_default();
                let mut it = s.chars();
                match (it.next(), it.next()) {
                    (Some(c), None) => Ok(c),
                    _ => Err(vocab_error(format!("token {t} is not one character"))),
                }
            })
            .collect::<Result<Vec<char>>>()?;
        Self::from_chars(chars)
    }

    /// Writes the vocabulary to `path` as JSON (atomically).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.to_json()).expect("JSON values serialise");
        write_atomically(path.as_ref(), text.as_bytes())
    }

    /// Reads a vocabulary written by [`CharTokenizer::save`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let value: Value =
            serde_json::from_str(&text).map_err(|e| Error::format(path, e.to_string()))?;
        Self::from_json(&value).map_err(|e| Error::format(path, e.to_string()))
    }
}
