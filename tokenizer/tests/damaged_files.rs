//! Damaged `tokenizer.json` files on which the `tokenizers` library itself panics (found by
//! the fuzzer): each is refused with a typed `Format` error naming the file.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tessera_core::Error;
use tessera_tokenizer::Tokenizer;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/hf")
        .join(name)
}

fn fixture_json(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(fixture(name)).unwrap()).unwrap()
}

/// Writes `bytes` as a tokenizer.json and checks that loading it is a Format error.
fn assert_refused(bytes: &[u8], what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, bytes).unwrap();
    match Tokenizer::from_file(&path) {
        Err(e @ Error::Format { .. }) => {
            assert!(e.to_string().contains("tokenizer.json"), "{what}: {e}");
        }
        other => panic!("{what}: {:?}", other.map(|_| ())),
    }
}

#[test]
fn a_decoder_that_is_not_json_is_refused() {
    let text = std::fs::read_to_string(fixture("gpt2-tiny/tokenizer.json")).unwrap();
    let at = text.find("\"decoder\"").unwrap();
    // Cut inside the decoder's value: tokenizers' `expect("Helper")` panics on it.
    let cut = &text[..at + "\"decoder\": {\"type\": \"Byte".len()];
    assert_refused(cut.as_bytes(), "a cut decoder");
    assert_refused(
        br#"{"decoder": {"type": "ByteLevel","#,
        "a bare cut decoder",
    );
}

#[test]
fn a_continuing_subword_prefix_longer_than_a_merge_is_refused() {
    let mut t = fixture_json("gpt2-tiny/tokenizer.json");
    t["model"]["continuing_subword_prefix"] = json!("gelu_new");
    assert_refused(&serde_json::to_vec(&t).unwrap(), "a long prefix");
}

#[test]
fn a_precompiled_normalizer_without_its_map_is_refused() {
    let mut t = fixture_json("gpt2-tiny/tokenizer.json");
    t["normalizer"] = json!({"type": "Precompiled"});
    assert_refused(&serde_json::to_vec(&t).unwrap(), "Precompiled");
}

#[test]
fn a_template_naming_an_undefined_special_token_is_refused() {
    let mut t = fixture_json("llama-tiny/tokenizer.json");
    t["post_processor"]["special_tokens"] = json!({});
    // tokenizers loads this file, then panics on every encode that adds special tokens.
    assert_refused(&serde_json::to_vec(&t).unwrap(), "template");
}

#[test]
fn a_stream_goes_on_after_a_refused_id() {
    let tokenizer = Tokenizer::from_folder(fixture("gpt2-tiny")).unwrap();
    let ids = tokenizer.encode("hello world, again", false).unwrap();
    let n = tokenizer.vocab_size() as u32;
    let mut stream = tokenizer.text_stream(false);
    let mut text = String::new();
    for (k, &id) in ids.iter().enumerate() {
        if k == 1 {
            assert!(matches!(
                stream.push(n + 3),
                Err(Error::InvalidArgument { .. })
            ));
        }
        text.extend(stream.push(id).unwrap());
    }
    text.push_str(&stream.finish().unwrap());
    assert_eq!(text, "hello world, again");
    assert_eq!(stream.ids(), &ids[..]);
}
