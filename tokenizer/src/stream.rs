//! [`TextStream`]: generated ids to text, one id at a time.

use crate::Tokenizer;
use tessera_core::Result;

/// Decodes a growing sequence of ids into text pieces as they arrive. A byte-level token can
/// end in the middle of a UTF-8 character, so a piece is only released once the text decoded
/// so far ends in a whole character; the pieces concatenated, followed by
/// [`TextStream::finish`], equal [`Tokenizer::decode`] of all the ids (a text that really ends in
/// U+FFFD, or ids that stop inside a character, are held back until `finish`).
#[derive(Debug)]
pub struct TextStream<'a> {
    tokenizer: &'a Tokenizer,
    skip_special_tokens: bool,
    ids: Vec<u32>,
    /// Bytes of text already released.
    released: usize,
}

impl<'a> TextStream<'a> {
    pub(crate) fn new(tokenizer: &'a Tokenizer, skip_special_tokens: bool) -> Self {
        TextStream {
            tokenizer,
            skip_special_tokens,
            ids: Vec::new(),
            released: 0,
        }
    }

    /// Adds `id` and returns the text it completes, if any. An id the tokenizer refuses (one
    /// outside the vocabulary) is an error and is not added: the stream goes on without it.
    pub fn push(&mut self, id: u32) -> Result<Option<String>> {
        self.ids.push(id);
        let text = match self.tokenizer.decode(&self.ids, self.skip_special_tokens) {
            Ok(text) => text,
            Err(e) => {
                self.ids.pop();
                return Err(e);
            }
        };
        // An incomplete character decodes to U+FFFD at the end; wait for the next id.
        if text.ends_with('\u{FFFD}') || text.len() < self.released {
            return Ok(None);
        }
        let piece = text.get(self.released..).map(str::to_string);
        match piece {
            Some(p) if !p.is_empty() => {
                self.released = text.len();
                Ok(Some(p))
            }
            _ => Ok(None),
        }
    }

    /// The text held back so far (an ending that looked like an incomplete character), once
    /// no id will follow.
    pub fn finish(&mut self) -> Result<String> {
        let text = self.tokenizer.decode(&self.ids, self.skip_special_tokens)?;
        let rest = text.get(self.released..).unwrap_or_default().to_string();
        self.released = text.len();
        Ok(rest)
    }

    /// Every id pushed so far.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }
}
