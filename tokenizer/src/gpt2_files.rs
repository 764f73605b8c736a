//! GPT-2's original tokenizer files, `vocab.json` and `merges.txt` (what `transformers`'
//! `GPT2Tokenizer` reads, in folders older than `tokenizer.json`), built into the byte-level
//! BPE that `GPT2TokenizerFast` converts them to: no normalizer, a byte-level pre-tokenizer
//! without a prefix space, a byte-level decoder, and the special tokens the folder names.

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use tessera_core::{Error, Result};
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::AddedToken;

use crate::special_tokens::TOKENIZER_CONFIG_FILE;

/// The vocabulary file: a JSON object from token to id.
pub const VOCAB_FILE: &str = "vocab.json";
/// The merges file: one merge `a b` per line, in priority order, after a `#version` line.
pub const MERGES_FILE: &str = "merges.txt";

/// The token `GPT2Tokenizer` uses for beginning, end and unknown unless told otherwise.
const GPT2_END_OF_TEXT: &str = "<|endoftext|>";

/// Whether `dir` holds GPT-2's two files.
pub(crate) fn present(dir: &Path) -> bool {
    dir.join(VOCAB_FILE).is_file() && dir.join(MERGES_FILE).is_file()
}

/// The tokenizer of `dir/vocab.json` and `dir/merges.txt`.
pub(crate) fn load(dir: &Path) -> Result<tokenizers::Tokenizer> {
    let vocab_path = dir.join(VOCAB_FILE);
    let vocab_text = std::fs::read_to_string(&vocab_path).map_err(|e| Error::io(&vocab_path, e))?;
    let vocab: HashMap<String, u32> = serde_json::from_str(&vocab_text)
        .map_err(|e| Error::format(&vocab_path, format!("not a JSON object of token ids: {e}")))?;
    let merges_path = dir.join(MERGES_FILE);
    let merges_text =
        std::fs::read_to_string(&merges_path).map_err(|e| Error::io(&merges_path, e))?;
    let merges = parse_merges(&merges_text).map_err(|msg| Error::format(&merges_path, msg))?;
    let specials = special_token_names(dir)?;
    let bpe = BPE::builder()
        .vocab_and_merges(
            vocab
                .iter()
                .map(|(token, &id)| (token.clone(), id))
                .collect::<Vocab>(),
            merges,
        )
        .build()
        .map_err(|e| Error::format(&merges_path, format!("not GPT-2 merges: {e}")))?;
    let mut tokenizer = tokenizers::Tokenizer::new(bpe);
    tokenizer
        .with_pre_tokenizer(Some(ByteLevel::default().add_prefix_space(false)))
        .with_decoder(Some(ByteLevel::default()))
        .with_post_processor(Some(ByteLevel::default().trim_offsets(false)));
    // The special tokens are whole tokens of the vocabulary, never split or merged.
    let added: Vec<AddedToken> = specials
        .into_iter()
        .filter(|name| vocab.contains_key(name))
        .map(|name| AddedToken::from(name, true))
        .collect();
    tokenizer.add_special_tokens(&added);
    Ok(tokenizer)
}

/// The merges of a `merges.txt`: a first line starting with `#version` is skipped, as are
/// empty lines; every other line is two tokens separated by one space.
pub(crate) fn parse_merges(text: &str) -> std::result::Result<Vec<(String, String)>, String> {
    let mut merges = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if (i == 0 && line.starts_with("#version")) || line.trim().is_empty() {
            continue;
        }
        match line.split_once(' ') {
            Some((a, b)) if !a.is_empty() && !b.is_empty() && !b.contains(' ') => {
                merges.push((a.to_string(), b.to_string()))
            }
            _ => return Err(format!("line {} is not a merge `a b`: {line:?}", i + 1)),
        }
    }
    Ok(merges)
}

/// The special tokens: `<|endoftext|>` (GPT-2's default), and whatever `tokenizer_config.json`
/// names as `bos_token`, `eos_token`, `unk_token`, `pad_token` or in `added_tokens_decoder`.
fn special_token_names(dir: &Path) -> Result<Vec<String>> {
    let mut names = vec![GPT2_END_OF_TEXT.to_string()];
    let path = dir.join(TOKENIZER_CONFIG_FILE);
    if !path.exists() {
        return Ok(names);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let config: Value = serde_json::from_str(&text)
        .map_err(|e| Error::format(&path, format!("not valid JSON: {e}")))?;
    let content = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    };
    for key in ["bos_token", "eos_token", "unk_token", "pad_token"] {
        names.extend(config.get(key).and_then(content));
    }
    if let Some(Value::Object(decoder)) = config.get("added_tokens_decoder") {
        names.extend(decoder.values().filter_map(content));
    }
    names.sort();
    names.dedup();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_parse_after_the_version_line_and_refuse_broken_lines() {
        let merges = parse_merges("#version: 0.2\nĠ t\nh e\n\n").unwrap();
        assert_eq!(
            merges,
            vec![("Ġ".into(), "t".into()), ("h".into(), "e".into())]
        );
        assert!(parse_merges("a b\nc\n").unwrap_err().contains("line 2"));
        assert!(parse_merges("a b c\n").is_err());
        assert!(parse_merges(" b\n").is_err());
    }
}
