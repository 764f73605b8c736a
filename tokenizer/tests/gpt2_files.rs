//! GPT-2's original `vocab.json` + `merges.txt`: the same ids and text as the `tokenizer.json`
//! of the same byte-level BPE (the fixture's, itself checked against Python's `tokenizers`),
//! and typed errors for broken files.

use std::path::{Path, PathBuf};
use tessera_core::Error;
use tessera_tokenizer::{Tokenizer, MERGES_FILE, VOCAB_FILE};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/hf")
        .join(name)
}

/// A folder holding the gpt2-tiny BPE as `vocab.json` and `merges.txt` (written from its
/// `tokenizer.json` the way GPT-2's files are laid out), with its `tokenizer_config.json`.
fn gpt2_style_folder() -> tempfile::TempDir {
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("gpt2-tiny/tokenizer.json")).unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(VOCAB_FILE),
        json["model"]["vocab"].to_string(),
    )
    .unwrap();
    let mut merges = String::from("#version: 0.2\n");
    for pair in json["model"]["merges"].as_array().unwrap() {
        let pair = pair.as_array().unwrap();
        merges += &format!(
            "{} {}\n",
            pair[0].as_str().unwrap(),
            pair[1].as_str().unwrap()
        );
    }
    std::fs::write(dir.path().join(MERGES_FILE), merges).unwrap();
    std::fs::copy(
        fixture("gpt2-tiny/tokenizer_config.json"),
        dir.path().join("tokenizer_config.json"),
    )
    .unwrap();
    dir
}

#[test]
fn vocab_and_merges_encode_and_decode_as_the_tokenizer_json_does() {
    let reference = Tokenizer::from_folder(fixture("gpt2-tiny")).unwrap();
    let dir = gpt2_style_folder();
    let tokenizer = Tokenizer::from_folder(dir.path()).unwrap();
    assert_eq!(tokenizer.path(), dir.path().join(VOCAB_FILE));
    assert_eq!(tokenizer.special_tokens(), reference.special_tokens());
    let mut texts: Vec<String> = [
        "Hello, world!",
        "",
        "   leading spaces and trailing   ",
        "tabs\tand\nnew\n\nlines\r\n",
        "unicode: héllo wörld — ✓ 日本語 🙂",
        "numbers 1234567 and punctuation!!! (it's, they're, we'll)",
        "<|endoftext|>text after the end<|endoftext|>",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Some of the corpus the BPE was trained on, when it is installed.
    let fortunes = Path::new("/usr/share/games/fortunes/art");
    match std::fs::read_to_string(fortunes) {
        Ok(text) => texts.push(text),
        Err(_) => eprintln!("skipped the corpus text: Debian's fortunes are not installed"),
    }
    for text in &texts {
        let ids = tokenizer.encode(text, true).unwrap();
        assert_eq!(ids, reference.encode(text, true).unwrap(), "{text:?}");
        assert_eq!(
            tokenizer.decode(&ids, false).unwrap(),
            reference.decode(&ids, false).unwrap()
        );
        assert_eq!(
            tokenizer.decode(&ids, true).unwrap(),
            reference.decode(&ids, true).unwrap()
        );
    }
    // The end-of-text token is one special token, never split.
    let eot = tokenizer.token_to_id("<|endoftext|>").unwrap();
    assert_eq!(tokenizer.encode("<|endoftext|>", false).unwrap(), vec![eot]);
    assert_eq!(tokenizer.decode(&[eot], true).unwrap(), "");
}

#[test]
fn broken_gpt2_files_are_typed_errors_naming_them() {
    let dir = gpt2_style_folder();
    std::fs::write(dir.path().join(MERGES_FILE), "#version: 0.2\na b\nbroken\n").unwrap();
    let err = Tokenizer::from_folder(dir.path()).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    assert!(
        err.to_string().contains(MERGES_FILE) && err.to_string().contains("line 3"),
        "{err}"
    );

    let dir = gpt2_style_folder();
    std::fs::write(dir.path().join(VOCAB_FILE), "[1, 2]").unwrap();
    let err = Tokenizer::from_folder(dir.path()).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    assert!(err.to_string().contains(VOCAB_FILE), "{err}");

    // A merge of tokens the vocabulary lacks.
    let dir = gpt2_style_folder();
    std::fs::write(dir.path().join(MERGES_FILE), "zzzq qqqz\n").unwrap();
    let err = Tokenizer::from_folder(dir.path()).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");

    // Neither file set: the missing tokenizer.json is the error.
    let empty = tempfile::tempdir().unwrap();
    let err = Tokenizer::from_folder(empty.path()).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
}
