//! The fixture tokenizer (`fixtures/hf/tokenizer`, trained and encoded by the Python
//! `tokenizers` package in `xtask/peers/make_hf_fixtures.py`): the same ids as Python on the
//! whole fortunes corpus and on edge-case strings, special tokens from the model folders,
//! streaming decoding, and typed errors.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tessera_core::Error;
use tessera_tokenizer::Tokenizer;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/hf")
        .join(name)
}

fn python_reference() -> Value {
    let text = std::fs::read_to_string(fixture("tokenizer/corpus_ids.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// The fortunes corpus read as the fixture script reads it: every regular UTF-8 file, in
/// sorted name order, symbolic links skipped. `None` (printed) when it is not installed.
fn corpus_files() -> Option<Vec<(String, String)>> {
    let dir = Path::new("/usr/share/games/fortunes");
    if !dir.is_dir() {
        eprintln!("skipped: Debian's fortunes are not installed (apt-get install fortunes)");
        return None;
    }
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries.into_iter().rev() {
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                if let Ok(text) = String::from_utf8(std::fs::read(&path).unwrap()) {
                    let name = path.strip_prefix(dir).unwrap().display().to_string();
                    out.push((name, text));
                }
            }
        }
    }
    out.sort();
    Some(out)
}

#[test]
fn the_whole_corpus_encodes_to_the_ids_of_python_tokenizers() {
    let Some(files) = corpus_files() else {
        return;
    };
    let reference = python_reference();
    let tokenizer = Tokenizer::from_file(fixture("tokenizer/tokenizer.json")).unwrap();
    // File by file first: a mismatch names the file.
    for (pair, (name, text)) in reference["per_file_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&files)
    {
        assert_eq!(pair[0].as_str().unwrap(), name);
        let n = tokenizer.encode(text, false).unwrap().len();
        assert_eq!(n as u64, pair[1].as_u64().unwrap(), "{name}");
    }
    let text: String = files.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(text.len() as u64, reference["num_bytes"].as_u64().unwrap());
    let all = tokenizer.encode(&text, false).unwrap();
    assert_eq!(all.len() as u64, reference["num_tokens"].as_u64().unwrap());
    let first = ids(&reference["first_ids"]);
    assert_eq!(all[..first.len()], first[..]);
    let mut hash = Sha256::new();
    for id in &all {
        hash.update(id.to_le_bytes());
    }
    let digest: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(digest, reference["sha256_u32_le"].as_str().unwrap());
}

#[test]
fn edge_case_strings_encode_and_decode_like_python() {
    let reference = python_reference();
    let gpt2 = Tokenizer::from_folder(fixture("gpt2-tiny")).unwrap();
    let llama = Tokenizer::from_folder(fixture("llama-tiny")).unwrap();
    for sample in reference["samples"].as_array().unwrap() {
        let text = sample["text"].as_str().unwrap();
        let expected = ids(&sample["ids"]);
        assert_eq!(gpt2.encode(text, false).unwrap(), expected, "{text:?}");
        // GPT-2's tokenizer adds nothing; Llama's template adds the beginning-of-text token.
        assert_eq!(gpt2.encode(text, true).unwrap(), expected, "{text:?}");
        let with_bos = ids(&sample["ids_with_bos_template"]);
        assert_eq!(llama.encode(text, true).unwrap(), with_bos, "{text:?}");
        assert_eq!(
            gpt2.decode(&expected, true).unwrap(),
            sample["decoded"].as_str().unwrap()
        );
        assert_eq!(
            gpt2.decode(&expected, false).unwrap(),
            sample["decoded_keep_special"].as_str().unwrap()
        );
    }
}

#[test]
fn special_tokens_come_from_the_folder() {
    let gpt2 = Tokenizer::from_folder(fixture("gpt2-tiny")).unwrap();
    let llama = Tokenizer::from_folder(fixture("llama-tiny")).unwrap();
    let eot = gpt2.token_to_id("<|endoftext|>").unwrap();
    let bot = gpt2.token_to_id("<|begin_of_text|>").unwrap();
    assert_eq!(gpt2.special_tokens().eos_id(), Some(eot));
    assert_eq!(gpt2.special_tokens().bos_id(), Some(eot));
    assert_eq!(llama.special_tokens().bos_id(), Some(bot));
    assert_eq!(llama.special_tokens().eos_id(), Some(eot));
    // A bare tokenizer.json names none.
    let bare = Tokenizer::from_file(fixture("tokenizer/tokenizer.json")).unwrap();
    assert_eq!(bare.special_tokens().bos_id(), None);
}

#[test]
fn streamed_pieces_concatenate_to_the_decoded_text() {
    let tokenizer = Tokenizer::from_folder(fixture("gpt2-tiny")).unwrap();
    // Multi-byte characters split over several byte-level tokens.
    let text = "ünïcödé — emoji 🦀 and plain words.";
    let ids = tokenizer.encode(text, false).unwrap();
    let mut stream = tokenizer.text_stream(true);
    let mut pieces = Vec::new();
    for &id in &ids {
        if let Some(p) = stream.push(id).unwrap() {
            assert!(
                !p.contains('\u{FFFD}'),
                "a partial character was released: {p:?}"
            );
            pieces.push(p);
        }
    }
    assert!(pieces.len() > 5);
    assert_eq!(pieces.concat(), text);
}

#[test]
fn bad_input_is_a_typed_error() {
    let tokenizer = Tokenizer::from_folder(fixture("gpt2-tiny")).unwrap();
    let n = tokenizer.vocab_size() as u32;
    assert!(matches!(
        tokenizer.decode(&[1, n], false),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        Tokenizer::from_file("/nonexistent/tokenizer.json"),
        Err(Error::Io { .. })
    ));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    for junk in ["", "{", "{\"model\": 3}", "\u{0}\u{1}binary"] {
        std::fs::write(&path, junk).unwrap();
        assert!(
            matches!(Tokenizer::from_file(&path), Err(Error::Format { .. })),
            "{junk:?}"
        );
    }
    // A folder whose tokenizer_config.json names a token the vocabulary lacks.
    std::fs::copy(fixture("gpt2-tiny/tokenizer.json"), &path).unwrap();
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        r#"{"eos_token": "<|not-a-token|>"}"#,
    )
    .unwrap();
    let err = Tokenizer::from_folder(dir.path()).unwrap_err();
    assert!(err.to_string().contains("<|not-a-token|>"), "{err}");
}
