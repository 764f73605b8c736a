//! The `tessera-tokenizer` crate over the fixture tokenizers (GPT-2's byte-level BPE, and
//! Llama's, whose template adds a beginning-of-text token), embedded in the fuzzer:
//!
//! * `encode` then `decode` of random text (any Unicode, special-token text, long runs, empty,
//!   or lossy UTF-8 of mutated bytes) gives the text back: byte-level BPE is lossless for
//!   every valid UTF-8 string (checked on the fixtures before these entries were written), so
//!   `decode(encode(s, add), false)` is `s` after what the template adds, and with
//!   `skip_special_tokens` it is `s` without the special tokens' text;
//! * `decode` of random ids is an `InvalidArgument` error exactly when an id is outside the
//!   vocabulary; of valid ids it is text that encodes and decodes to itself;
//! * a `TextStream`'s pieces, then `finish`, concatenate to `decode` of the ids pushed;
//! * `from_file` / `from_folder` of mutated `tokenizer.json` and `tokenizer_config.json` files
//!   (JSON values replaced or removed, bytes changed or cut) give a tokenizer that encodes and
//!   decodes without panicking, or a typed error (`Format` for a file that is not a tokenizer,
//!   `Io` for a missing one); the same for GPT-2's `vocab.json` + `merges.txt`.

use super::files::make_bytes;
use super::kinds::*;
use super::pretrained_files::json_value;
use super::{op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome, Skip};
use crate::rng::Rng;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tessera_core::Error;
use tessera_tokenizer::Tokenizer;

/// A fixture tokenizer folder: `tokenizer.json` and `tokenizer_config.json`.
struct TokenizerFixture {
    name: &'static str,
    tokenizer: &'static [u8],
    config: &'static [u8],
}

static TOKENIZERS: [TokenizerFixture; 2] = [
    TokenizerFixture {
        name: "gpt2-tiny",
        tokenizer: include_bytes!("../../../fixtures/hf/gpt2-tiny/tokenizer.json"),
        config: include_bytes!("../../../fixtures/hf/gpt2-tiny/tokenizer_config.json"),
    },
    TokenizerFixture {
        name: "llama-tiny",
        tokenizer: include_bytes!("../../../fixtures/hf/llama-tiny/tokenizer.json"),
        config: include_bytes!("../../../fixtures/hf/llama-tiny/tokenizer_config.json"),
    },
];

/// The special (added) tokens of both fixtures: `decode(.., skip_special_tokens = true)` leaves
/// their text out.
const SPECIAL_TEXTS: [&str; 2] = ["<|endoftext|>", "<|begin_of_text|>"];

/// Writes a fixture folder into `dir` (fresh) and loads it with `from_folder`.
fn load_fixture(dir: &Path, f: &TokenizerFixture) -> Result<Tokenizer, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("tokenizer.json"), f.tokenizer).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("tokenizer_config.json"), f.config).map_err(|e| e.to_string())?;
    Tokenizer::from_folder(dir).map_err(|e| format!("the {} fixture did not load: {e}", f.name))
}

/// The fixture the size argument at `i` picks, and a scratch folder for it.
fn fixture_dir<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    i: usize,
    tag: &str,
) -> (&'static TokenizerFixture, PathBuf) {
    let f = &TOKENIZERS[c.size(i) % TOKENIZERS.len()];
    (f, c.dir().join(format!("tok-{tag}-{}", f.name)))
}

/// A random character: ASCII, controls, Latin-1, any BMP character (no surrogates),
/// supplementary planes, and the awkward ones (U+FFFD, BOM, joiners, combining marks,
/// direction overrides, NUL, the last code point).
fn random_char(rng: &mut Rng) -> char {
    let code = match rng.below(10) {
        0..=2 => rng.range(0x20, 0x7E) as u32,
        3 => rng.range(0, 0x1F) as u32,
        4 => rng.range(0x80, 0xFF) as u32,
        5 | 6 => rng.range(0x100, 0xFFFF) as u32,
        7 => rng.range(0x1_0000, 0x10_FFFF) as u32,
        _ => rng.pick(&[
            0xFFFD, 0xFEFF, 0x200D, 0x200B, 0x0301, 0x202E, 0x0000, 0x10_FFFF, 0x3000, 0x00A0,
            0x1F980, 0xFFFF, 0xE000,
        ]),
    };
    char::from_u32(code).unwrap_or('\u{FFFD}')
}

/// Random text: pieces of words, whitespace, special-token text (whole, partial, nested),
/// random characters and emoji sequences, sometimes one piece repeated hundreds of times.
pub fn random_text(seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut out = String::new();
    let pieces = match rng.below(10) {
        0 => 0,
        1..=7 => rng.range(1, 8),
        _ => rng.range(8, 40),
    };
    for _ in 0..pieces {
        let piece: String = match rng.below(9) {
            0 => {
                let n = rng.range(1, 10);
                (0..n)
                    .map(|_| rng.pick(&['a', 'e', 'l', 'o', 't', 'h', 'n', 's', 'T', '\'']))
                    .collect()
            }
            1 => rng
                .pick(&[
                    " ", "  ", "\n", "\t", "\r\n", " \n ", "\u{3000}", "\u{A0}", "\n\n\n",
                ])
                .into(),
            2 => rng
                .pick(&[
                    "<|endoftext|>",
                    "<|begin_of_text|>",
                    "<|endoftext",
                    "<|",
                    "|>",
                    "<|endo<|endoftext|>ftext|>",
                    " <|endoftext|> ",
                    "<|begin_of_text|><|endoftext|>",
                    "<|ENDOFTEXT|>",
                ])
                .into(),
            3 | 4 => (0..rng.range(1, 6))
                .map(|_| random_char(&mut rng))
                .collect(),
            5 => rng
                .pick(&[
                    "👩‍👩‍👧",
                    "🇯🇵",
                    "e\u{301}",
                    "日本語",
                    "ǅ",
                    "ﬁ",
                    "'s 're 've",
                    "1234567890",
                ])
                .into(),
            6 => rng
                .pick(&["hello", " world", "Hello, world!", " the", "\u{FFFD}"])
                .into(),
            7 => {
                // A long run of one piece.
                let unit = rng.pick(&["a", " ", "🦀", "<|endoftext|>", "ab", "\n", "é"]);
                unit.repeat(rng.range(50, 1500))
            }
            _ => random_char(&mut rng).to_string(),
        };
        out.push_str(&piece);
        if out.len() > 12_000 {
            break;
        }
    }
    out
}

/// `text` without the special tokens' text, matched leftmost as the tokenizer matches them.
fn without_specials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(ch) = rest.chars().next() {
        match SPECIAL_TEXTS.iter().find(|s| rest.starts_with(**s)) {
            Some(s) => rest = &rest[s.len()..],
            None => {
                out.push(ch);
                rest = &rest[ch.len_utf8()..];
            }
        }
    }
    out
}

/// Pushes `ids` into a text stream; the concatenated pieces and what `finish` releases, or the
/// error of a push.
fn streamed(tok: &Tokenizer, ids: &[u32], skip: bool) -> tessera_core::Result<(String, String)> {
    let mut stream = tok.text_stream(skip);
    let mut out = String::new();
    for &id in ids {
        if let Some(piece) = stream.push(id)? {
            out.push_str(&piece);
        }
    }
    let rest = stream.finish()?;
    Ok((out, rest))
}

/// Checks the stream of `ids` against `decoded` (`decode` of the same ids): the pieces are a
/// prefix of it that stops short only before a trailing U+FFFD (an incomplete character, or
/// a real one, held back), and `finish` releases the rest.
fn check_stream(tok: &Tokenizer, ids: &[u32], skip: bool, decoded: &str) -> Result<(), String> {
    let (pieces, rest) =
        streamed(tok, ids, skip).map_err(|e| format!("a stream of valid ids failed: {e}"))?;
    let held_back_ok = rest.is_empty() || rest.ends_with('\u{FFFD}');
    if format!("{pieces}{rest}") != decoded || !held_back_ok {
        return Err(format!(
            "the stream's pieces {:?} and finish {:?} are not decode's {:?}",
            preview(&pieces),
            preview(&rest),
            preview(decoded)
        ));
    }
    Ok(())
}

/// The first characters of a long text, for messages.
fn preview(s: &str) -> String {
    let p: String = s.chars().take(80).collect();
    if p.len() < s.len() {
        format!("{p}... ({} bytes)", s.len())
    } else {
        p
    }
}

/// `encode` then `decode` of random text on a fixture tokenizer.
fn round_trip<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let (fixture, dir) = fixture_dir(c, 0, "rt");
    let tok = match load_fixture(&dir, fixture) {
        Ok(t) => t,
        Err(e) => return Outcome::Break(e),
    };
    let text = if c.flag(3) {
        String::from_utf8_lossy(&make_bytes(c.bytes(1))).into_owned()
    } else {
        random_text(c.bytes(1).seed)
    };
    let add = c.flag(2);
    let r = (|| -> Result<(), String> {
        let ids = tok
            .encode(&text, add)
            .map_err(|e| format!("encoding valid text failed: {e}"))?;
        let n = tok.vocab_size();
        if let Some(bad) = ids.iter().find(|&&i| i as usize >= n) {
            return Err(format!(
                "encode gave id {bad} outside the vocabulary of {n}"
            ));
        }
        let prefix = tok
            .encode("", add)
            .and_then(|ids| tok.decode(&ids, false))
            .map_err(|e| format!("the empty text: {e}"))?;
        let back = tok
            .decode(&ids, false)
            .map_err(|e| format!("decoding encoded ids failed: {e}"))?;
        if back != format!("{prefix}{text}") {
            return Err(format!(
                "decode(encode({:?}, {add}), false) = {:?}",
                preview(&text),
                preview(&back)
            ));
        }
        let skipped = tok
            .decode(&ids, true)
            .map_err(|e| format!("decoding encoded ids failed: {e}"))?;
        if skipped != without_specials(&text) {
            return Err(format!(
                "decode(encode({:?}, {add}), true) = {:?}",
                preview(&text),
                preview(&skipped)
            ));
        }
        // The stream decodes the whole prefix at every id: the first ids are enough.
        let head = &ids[..ids.len().min(200)];
        let skip = c.flag(2) != c.flag(3);
        let decoded = tok.decode(head, skip).map_err(|e| e.to_string())?;
        check_stream(&tok, head, skip, &decoded)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    match r {
        Ok(()) => Outcome::Ok(Vec::new()),
        Err(e) => Outcome::Break(format!("{}: {e}", fixture.name)),
    }
}

/// `decode` and streams of random ids, valid or not.
fn decode_ids<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let (fixture, dir) = fixture_dir(c, 0, "ids");
    let tok = match load_fixture(&dir, fixture) {
        Ok(t) => t,
        Err(e) => return Outcome::Break(e),
    };
    let _ = std::fs::remove_dir_all(&dir);
    let n = tok.vocab_size() as u32;
    let mut rng = Rng::new(c.bytes(1).seed);
    let invalid_rate = rng.pick(&[0u64, 0, 0, 2, 20]);
    let len = match rng.below(10) {
        0 => 0,
        1..=8 => rng.range(1, 32),
        _ => rng.range(33, 300),
    };
    let ids: Vec<u32> = (0..len)
        .map(|_| {
            if rng.chance(invalid_rate) {
                rng.pick(&[n, n + 1, u32::MAX, 1 << 31, n + 1000])
            } else {
                rng.below(n as usize) as u32
            }
        })
        .collect();
    let skip = c.flag(2);
    let valid = ids.iter().all(|&i| i < n);
    let r = (|| -> Result<Outcome<B>, String> {
        match tok.decode(&ids, skip) {
            Err(Error::InvalidArgument { .. }) if !valid => {
                // A stream refuses each invalid id when it comes and goes on without it:
                // its text is then the decoded text of the valid ids.
                let mut stream = tok.text_stream(skip);
                let mut text = String::new();
                for (k, &id) in ids.iter().enumerate() {
                    match (stream.push(id), id < n) {
                        (Ok(piece), true) => text.extend(piece),
                        (Err(Error::InvalidArgument { .. }), false) => {}
                        (other, _) => return Err(format!("stream push {k} of id {id}: {other:?}")),
                    }
                }
                let valid_ids: Vec<u32> = ids.iter().copied().filter(|&i| i < n).collect();
                text.push_str(&stream.finish().map_err(|e| format!("finish: {e}"))?);
                let expected = tok
                    .decode(&valid_ids, skip)
                    .map_err(|e| format!("decoding the valid ids: {e}"))?;
                if text != expected || stream.ids() != &valid_ids[..] {
                    return Err(format!(
                        "a stream with refused ids gave {:?}, decode of the valid ids {:?}",
                        preview(&text),
                        preview(&expected)
                    ));
                }
                Ok(Outcome::Err("invalid ids refused".into()))
            }
            Err(e) if !valid => Err(format!(
                "invalid ids gave another error than InvalidArgument: {e}"
            )),
            Err(e) => Err(format!("decoding valid ids failed: {e}")),
            Ok(_) if !valid => Err(format!("ids {ids:?} outside the vocabulary of {n} decoded")),
            Ok(text) => {
                // Decoded text encodes and decodes to itself (special tokens' text included).
                if !skip {
                    let again = tok
                        .encode(&text, false)
                        .and_then(|ids| tok.decode(&ids, false))
                        .map_err(|e| format!("re-encoding decoded text: {e}"))?;
                    if again != text {
                        return Err(format!(
                            "decode(encode(decode(ids))) = {:?} != {:?}",
                            preview(&again),
                            preview(&text)
                        ));
                    }
                }
                let head = &ids[..ids.len().min(200)];
                let decoded = tok.decode(head, skip).map_err(|e| e.to_string())?;
                check_stream(&tok, head, skip, &decoded)?;
                Ok(Outcome::Ok(Vec::new()))
            }
        }
    })();
    r.unwrap_or_else(|e| Outcome::Break(format!("{}: {e}", fixture.name)))
}

/// Replaces or removes a random node of `v` (a walk of up to `depth` steps from the root).
fn mutate_json(v: &mut Value, rng: &mut Rng, depth: usize) {
    let walk_on = depth > 0 && rng.chance(75);
    match v {
        Value::Object(m) if !m.is_empty() => {
            let keys: Vec<String> = m.keys().cloned().collect();
            let key = keys[rng.below(keys.len())].clone();
            if walk_on {
                if let Some(child) = m.get_mut(&key) {
                    return mutate_json(child, rng, depth - 1);
                }
            }
            if rng.chance(30) {
                m.remove(&key);
            } else {
                m.insert(key, json_value(rng));
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let i = rng.below(a.len());
            if walk_on {
                return mutate_json(&mut a[i], rng, depth - 1);
            }
            match rng.below(3) {
                0 => {
                    a.remove(i);
                }
                1 => a.push(json_value(rng)),
                _ => a[i] = json_value(rng),
            }
        }
        other => *other = json_value(rng),
    }
}

/// The component kinds of a `tokenizer.json` and their `type` names.
const COMPONENTS: [(&str, &[&str]); 5] = [
    (
        "normalizer",
        &[
            "BertNormalizer",
            "Strip",
            "StripAccents",
            "NFC",
            "NFD",
            "NFKC",
            "NFKD",
            "Sequence",
            "Lowercase",
            "Nmt",
            "Precompiled",
            "Replace",
            "Prepend",
            "ByteLevel",
            "Unknown",
        ],
    ),
    (
        "pre_tokenizer",
        &[
            "BertPreTokenizer",
            "ByteLevel",
            "Delimiter",
            "Metaspace",
            "Whitespace",
            "Sequence",
            "Split",
            "Punctuation",
            "WhitespaceSplit",
            "Digits",
            "UnicodeScripts",
            "FixedLength",
        ],
    ),
    (
        "post_processor",
        &[
            "RobertaProcessing",
            "BertProcessing",
            "ByteLevel",
            "TemplateProcessing",
            "Sequence",
        ],
    ),
    (
        "decoder",
        &[
            "BPEDecoder",
            "ByteLevel",
            "WordPiece",
            "Metaspace",
            "CTC",
            "Sequence",
            "Replace",
            "Fuse",
            "Strip",
            "ByteFallback",
        ],
    ),
    ("model", &["BPE", "WordPiece", "WordLevel", "Unigram"]),
];

/// Fields tokenizer components read.
const COMPONENT_FIELDS: [&str; 26] = [
    "pattern",
    "content",
    "behavior",
    "invert",
    "replacement",
    "prepend_scheme",
    "split",
    "add_prefix_space",
    "trim_offsets",
    "use_regex",
    "single",
    "pair",
    "special_tokens",
    "sep",
    "cls",
    "vocab",
    "merges",
    "unk_token",
    "unk_id",
    "dropout",
    "continuing_subword_prefix",
    "end_of_word_suffix",
    "byte_fallback",
    "decoders",
    "normalizers",
    "pretokenizers",
];

/// A component object of a random type with some random fields.
fn random_component(rng: &mut Rng, types: &[&str]) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("type".into(), Value::String(rng.pick(types).to_string()));
    for _ in 0..rng.range(0, 4) {
        let field = rng.pick(&COMPONENT_FIELDS);
        let v = match (field, rng.below(3)) {
            ("pattern", 0) => {
                serde_json::json!({"Regex": rng.pick(&["(", "\\p{L}+", "a{99999}", "[", ""])})
            }
            ("pattern", 1) => serde_json::json!({"String": rng.pick(&["", " ", "<|"])}),
            ("vocab", 0) => serde_json::json!([["a", 0.0], ["b", -1.0]]),
            ("vocab", 1) => serde_json::json!({"a": 0, "b": 4294967295u64, "ab": 1}),
            ("merges", 0) => serde_json::json!(["a b", "ab c"]),
            ("merges", 1) => serde_json::json!([["a", "b"], ["", ""]]),
            _ => json_value(rng),
        };
        m.insert(field.into(), v);
    }
    Value::Object(m)
}

/// The bytes of a mutated JSON file: values replaced or removed, components replaced by
/// others, or bytes changed or cut.
fn mutated_json_file(original: &[u8], rng: &mut Rng) -> Vec<u8> {
    match rng.below(12) {
        10 | 11 => match serde_json::from_slice::<Value>(original) {
            Ok(mut v) => {
                let (key, types) = rng.pick(&COMPONENTS);
                let component = match rng.below(3) {
                    0 => {
                        // A sequence of components.
                        let inner: Vec<Value> = (0..rng.range(0, 3))
                            .map(|_| random_component(rng, types))
                            .collect();
                        let list =
                            rng.pick(&["normalizers", "pretokenizers", "processors", "decoders"]);
                        serde_json::json!({"type": "Sequence", list: inner})
                    }
                    _ => random_component(rng, types),
                };
                if let Value::Object(m) = &mut v {
                    m.insert(key.into(), component);
                }
                serde_json::to_vec(&v).unwrap_or_default()
            }
            Err(_) => original.to_vec(),
        },
        0..=5 => match serde_json::from_slice::<Value>(original) {
            Ok(mut v) => {
                for _ in 0..rng.range(1, 3) {
                    mutate_json(&mut v, rng, 6);
                }
                serde_json::to_vec(&v).unwrap_or_default()
            }
            Err(_) => original.to_vec(),
        },
        6 | 7 => {
            let mut b = original.to_vec();
            for _ in 0..rng.range(1, 4) {
                if b.is_empty() {
                    break;
                }
                let at = rng.below(b.len());
                b[at] = rng.pick(&[b'"', b'{', b'}', b'[', b']', b',', b':', b'0', b'\\', 0xFF]);
            }
            b
        }
        8 => original[..rng.below(original.len() + 1)].to_vec(),
        _ => {
            let mut b = original.to_vec();
            b.extend((0..rng.range(1, 16)).map(|_| rng.next_u64() as u8));
            b
        }
    }
}

/// Whether a `tokenizer.json` is one on which the `tokenizers` crate (0.22.2) panics, in
/// `Tokenizer::from_bytes` or on the first encode (the fuzzer's findings, kept as an oracle):
/// `tessera-tokenizer` must refuse such a file with a `Format` error.
pub fn tokenizers_panics_on(bytes: &[u8]) -> Option<&'static str> {
    let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
        // a `decoder` value that is not valid JSON panics in
        // tokenizers-0.22.2/src/decoders/mod.rs:90 (`expect("Helper")`) instead of failing:
        // Tokenizer::from_file of a file holding `{"decoder": {"type": "ByteLevel",` (or the
        // gpt2-tiny tokenizer.json cut inside its decoder) panics with "Helper: Error(\"EOF while
        // parsing a value\", ...)".
        let key = b"\"decoder\"";
        let at = bytes.windows(key.len()).position(|w| w == key)?;
        let rest = &bytes[at + key.len()..];
        let colon = rest.iter().position(|&b| !b.is_ascii_whitespace())?;
        if rest[colon] != b':' {
            return None;
        }
        let value = &rest[colon + 1..];
        let mut values = serde_json::Deserializer::from_slice(value).into_iter::<Value>();
        return match values.next() {
            Some(Ok(_)) => None,
            _ => Some("a decoder that is not valid JSON panics in tokenizers"),
        };
    };
    // a BPE `continuing_subword_prefix` longer than the second part of a merge
    // panics in tokenizers-0.22.2/src/models/bpe/model.rs:186 (`&b[prefix_len..]`): the
    // gpt2-tiny tokenizer.json with "continuing_subword_prefix": "gelu_new" panics with "start
    // byte index 8 is out of bounds of `t`".
    let model = v.get("model");
    if let (Some(Value::String(prefix)), Some(Value::Array(merges))) = (
        model.and_then(|m| m.get("continuing_subword_prefix")),
        model.and_then(|m| m.get("merges")),
    ) {
        let short = merges.iter().any(|m| {
            let second = match m {
                Value::String(s) => s.split_once(' ').map(|(_, b)| b.to_string()),
                Value::Array(a) => a.get(1).and_then(Value::as_str).map(str::to_string),
                _ => None,
            };
            second.is_some_and(|b| !b.is_char_boundary(prefix.len()) || b.len() < prefix.len())
        });
        if short {
            return Some("a long continuing_subword_prefix panics in tokenizers");
        }
    }
    // a `Precompiled` normalizer without a valid `precompiled_charsmap` panics
    // in tokenizers-0.22.2/src/normalizers/mod.rs:143 (`expect("Precompiled")`): the gpt2-tiny
    // tokenizer.json with "normalizer": {"type": "Precompiled"} panics with "Precompiled:
    // Error(\"missing field `precompiled_charsmap`\", ...)".
    fn has_precompiled(v: &Value) -> bool {
        match v {
            Value::Object(m) => {
                m.get("type").and_then(Value::as_str) == Some("Precompiled")
                    || m.values().any(has_precompiled)
            }
            Value::Array(a) => a.iter().any(has_precompiled),
            _ => false,
        }
    }
    if v.get("normalizer").is_some_and(has_precompiled) {
        return Some("a Precompiled normalizer panics in tokenizers");
    }
    // a `TemplateProcessing` post-processor whose template names a special
    // token its `special_tokens` map lacks loads, but `encode(text, true)` then panics in
    // tokenizers-0.22.2/src/processors/template.rs:563 ("no entry found for key"): the
    // llama-tiny tokenizer.json with "post_processor": {.., "special_tokens": {}} loads with
    // Tokenizer::from_file and panics on encode("hello", true).
    fn bad_template(v: &Value) -> bool {
        match v {
            Value::Object(m)
                if m.get("type").and_then(Value::as_str) == Some("TemplateProcessing") =>
            {
                let special = m.get("special_tokens").and_then(Value::as_object);
                // Only the single-sequence template: `tessera-tokenizer` never encodes pairs,
                // so a damaged `pair` template loads and is never used (no panic).
                ["single"].iter().any(|key| match m.get(*key) {
                    None => false,
                    Some(Value::Array(pieces)) => pieces.iter().any(|piece| {
                        match piece.get("SpecialToken").map(|t| t.get("id")) {
                            None => false,
                            Some(Some(Value::String(id))) => {
                                !special.is_some_and(|s| s.contains_key(id))
                            }
                            Some(_) => true,
                        }
                    }),
                    Some(_) => true,
                }) || m.values().any(bad_template)
            }
            Value::Object(m) => m.values().any(bad_template),
            Value::Array(a) => a.iter().any(bad_template),
            _ => false,
        }
    }
    if v.get("post_processor").is_some_and(bad_template) {
        return Some("a template naming an unknown special token panics in tokenizers");
    }
    None
}

/// Loads mutated tokenizer files; a tokenizer that loads must encode and decode without
/// panicking.
/// Uses a tokenizer loaded from damaged files every way there is: whatever the files say,
/// that gives results or typed errors, never a panic.
fn use_loaded(tok: &Tokenizer, rng: &mut Rng) {
    for text in [
        "",
        "hello world",
        "<|endoftext|> é 🦀",
        &random_text(rng.next_u64()),
    ] {
        for add in [false, true] {
            if let Ok(ids) = tok.encode(text, add) {
                let _ = tok.decode(&ids, false);
                let _ = streamed(tok, &ids[..ids.len().min(64)], true);
            }
        }
    }
    let n = tok.vocab_size().min(u32::MAX as usize) as u32;
    let ids: Vec<u32> = (0..n.min(64)).chain([n.saturating_sub(1), n]).collect();
    let _ = tok.decode(&ids, false);
    let _ = tok.decode(&ids, true);
    let _ = tok.token_to_id("<|endoftext|>");
    let _ = format!("{tok:?}");
}

fn mutated_files<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<Outcome<B>, Skip> {
    let (fixture, dir) = fixture_dir(c, 0, "mut");
    let mut rng = Rng::new(c.bytes(1).seed);
    let (mutate_tokenizer, mutate_config) = match rng.below(4) {
        0 => (false, true),
        1 => (true, true),
        _ => (true, false),
    };
    let folder = c.flag(2);
    let setup = (|| -> std::io::Result<()> {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let tokenizer = match mutate_tokenizer {
            true => mutated_json_file(fixture.tokenizer, &mut rng),
            false => fixture.tokenizer.to_vec(),
        };
        std::fs::write(dir.join("tokenizer.json"), tokenizer)?;
        let config = match mutate_config {
            true => mutated_json_file(fixture.config, &mut rng),
            false => fixture.config.to_vec(),
        };
        std::fs::write(dir.join("tokenizer_config.json"), config)
    })();
    if let Err(e) = setup {
        return Ok(Outcome::Break(format!("setting up: {e}")));
    }
    let bytes = std::fs::read(dir.join("tokenizer.json")).unwrap_or_default();
    let panics = tokenizers_panics_on(&bytes);
    let loaded = if folder {
        Tokenizer::from_folder(&dir)
    } else {
        Tokenizer::from_file(dir.join("tokenizer.json"))
    };
    let outcome = match loaded {
        Ok(_) if panics.is_some() => Outcome::Break(format!(
            "{}: a file on which tokenizers panics loaded ({})",
            fixture.name,
            panics.unwrap_or_default()
        )),
        // The files exist: only a file that is not a tokenizer (Format) can be refused;
        // tokenizer_config.json is read as text, so bytes that are not UTF-8 are an Io error.
        Err(Error::Io { .. }) if !(folder && mutate_config) => Outcome::Break(format!(
            "{}: an existing file gave an Io error",
            fixture.name
        )),
        Err(e @ (Error::Format { .. } | Error::Io { .. })) => Outcome::Err(e.to_string()),
        Err(e) => Outcome::Break(format!(
            "{}: a bad file gave {e:?}, not Format",
            fixture.name
        )),
        Ok(tok) => {
            use_loaded(&tok, &mut rng);
            Outcome::Ok(Vec::new())
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    Ok(outcome)
}

/// GPT-2's `vocab.json` and `merges.txt` of the gpt2-tiny fixture's BPE.
fn gpt2_files() -> (String, String) {
    let json: Value = serde_json::from_slice(TOKENIZERS[0].tokenizer).unwrap_or_default();
    let mut merges = String::from("#version: 0.2\n");
    for pair in json["model"]["merges"].as_array().into_iter().flatten() {
        let (a, b) = (
            pair[0].as_str().unwrap_or(""),
            pair[1].as_str().unwrap_or(""),
        );
        merges += &format!("{a} {b}\n");
    }
    (json["model"]["vocab"].to_string(), merges)
}

/// `from_folder` of GPT-2's two files, one of them mutated (bytes changed or cut, a line of
/// the merges replaced, a JSON value of the vocabulary replaced): a tokenizer that encodes and
/// decodes without panicking, or a typed error (`Format`; `Io` for bytes that are not UTF-8).
fn mutated_gpt2_files<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<Outcome<B>, Skip> {
    let dir = c.dir().join("tok-gpt2-files");
    let mut rng = Rng::new(c.bytes(0).seed);
    let (vocab, merges) = gpt2_files();
    let (mut vocab, mut merges) = (vocab.into_bytes(), merges.into_bytes());
    let target = if rng.chance(50) {
        &mut vocab
    } else {
        &mut merges
    };
    match rng.below(4) {
        0 if !target.is_empty() => {
            let at = rng.below(target.len());
            target.truncate(at);
        }
        1 if !target.is_empty() => {
            for _ in 0..rng.range(1, 4) {
                let at = rng.below(target.len());
                target[at] = rng.next_u64() as u8;
            }
        }
        2 => {
            // A line replaced by random text (a merges line, or part of the vocabulary).
            let text = String::from_utf8_lossy(target).into_owned();
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            if !lines.is_empty() {
                let at = rng.below(lines.len());
                lines[at] = random_text(rng.next_u64()).chars().take(12).collect();
            }
            *target = lines.join("\n").into_bytes();
        }
        _ => {
            if let Ok(mut v) = serde_json::from_slice::<Value>(&vocab) {
                mutate_json(&mut v, &mut rng, 0);
                vocab = v.to_string().into_bytes();
            }
        }
    }
    let setup = (|| -> std::io::Result<()> {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(tessera_tokenizer::VOCAB_FILE), &vocab)?;
        std::fs::write(dir.join(tessera_tokenizer::MERGES_FILE), &merges)?;
        std::fs::write(dir.join("tokenizer_config.json"), TOKENIZERS[0].config)
    })();
    if let Err(e) = setup {
        return Ok(Outcome::Break(format!("setting up: {e}")));
    }
    let outcome = match Tokenizer::from_folder(&dir) {
        Err(e @ (Error::Format { .. } | Error::Io { .. })) => Outcome::Err(e.to_string()),
        Err(e) => Outcome::Break(format!("broken GPT-2 files gave {e:?}, not Format")),
        Ok(tok) => {
            use_loaded(&tok, &mut rng);
            Outcome::Ok(Vec::new())
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    Ok(outcome)
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op(
            "Tokenizer::from_folder (GPT-2 vocab.json + merges.txt, mutated), encode, decode",
            2,
            &[BYTES, B],
            NONE,
            |c| mutated_gpt2_files(c),
        ),
        op(
            "Tokenizer::encode, decode, text_stream (round trip of random text)",
            4,
            &[SIZE, BYTES, B, B],
            NONE,
            |c| Ok(round_trip(c)),
        ),
        op(
            "Tokenizer::decode, text_stream (random ids)",
            3,
            &[SIZE, BYTES, B],
            NONE,
            |c| Ok(decode_ids(c)),
        ),
        op(
            "Tokenizer::from_file / from_folder (mutated files), encode, decode",
            3,
            &[SIZE, BYTES, B],
            NONE,
            |c| mutated_files(c),
        ),
        op(
            "Tokenizer::from_file / from_folder (missing)",
            1,
            &[SIZE, B],
            NONE,
            |c| {
                let (_, dir) = fixture_dir(c, 0, "missing");
                let _ = std::fs::create_dir_all(&dir);
                let r = match c.flag(1) {
                    true => Tokenizer::from_folder(&dir),
                    false => Tokenizer::from_file(&dir),
                };
                let missing = Tokenizer::from_file(dir.join("absent.json"));
                let _ = std::fs::remove_dir_all(&dir);
                Ok(match (r, missing) {
                    (Err(Error::Io { .. }), Err(Error::Io { .. })) => Outcome::Ok(Vec::new()),
                    (a, b) => Outcome::Break(format!(
                        "a folder or a missing file gave {:?} and {:?}, not Io errors",
                        a.map(|_| ()),
                        b.map(|_| ())
                    )),
                })
            },
        ),
    ]
}
