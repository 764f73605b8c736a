//! The claim the tokenizer round-trip entries of the fuzzer rest on (`fuzz/src/ops/tokenizer_ops.rs`):
//! the fixture tokenizers (GPT-2's and Llama's byte-level BPE) give back any valid UTF-8 text,
//! `decode(encode(s, add), false)` = what the template adds + `s`, and with
//! `skip_special_tokens` the text without the special tokens' text.

use tessera_tokenizer::Tokenizer;

fn fixture(name: &str) -> Tokenizer {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/hf/");
    Tokenizer::from_folder(format!("{dir}{name}")).unwrap()
}

/// Awkward strings: special-token text whole, partial and nested, combining marks, emoji
/// sequences, U+FFFD, NUL, the last code point, zero-width characters, whitespace runs.
const CASES: [&str; 26] = [
    "",
    " ",
    "  ",
    "\n\n\t",
    "hello world",
    " leading",
    "trailing ",
    "<|endoftext|>",
    "a<|endoftext|>b",
    "<|begin_of_text|>x",
    " <|endoftext|> ",
    "<|endoftext",
    "<|endo<|endoftext|>ftext|>",
    "é",
    "日本語",
    "\u{FFFD}",
    "🦀🦀",
    "\u{0}",
    "\r\n",
    "ǅ",
    "a\u{301}",
    "ﬁ",
    "'s 're ",
    "👩‍👩‍👧🇯🇵",
    "\u{10FFFF}",
    "\u{200B}\u{FEFF}\u{202E}",
];

fn without_specials(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(ch) = rest.chars().next() {
        match ["<|endoftext|>", "<|begin_of_text|>"]
            .iter()
            .find(|s| rest.starts_with(**s))
        {
            Some(s) => rest = &rest[s.len()..],
            None => {
                out.push(ch);
                rest = &rest[ch.len_utf8()..];
            }
        }
    }
    out
}

fn check(tok: &Tokenizer, s: &str) {
    for add in [false, true] {
        let ids = tok.encode(s, add).unwrap();
        let prefix = tok.decode(&tok.encode("", add).unwrap(), false).unwrap();
        assert_eq!(
            tok.decode(&ids, false).unwrap(),
            format!("{prefix}{s}"),
            "{s:?}, add {add}"
        );
        assert_eq!(
            tok.decode(&ids, true).unwrap(),
            without_specials(s),
            "{s:?}, add {add}"
        );
    }
}

#[test]
fn byte_level_fixture_tokenizers_give_back_any_utf8_text() {
    for name in ["gpt2-tiny", "llama-tiny"] {
        let tok = fixture(name);
        for s in CASES {
            check(&tok, s);
        }
        // Random bytes made valid UTF-8 (U+FFFD for every invalid sequence).
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..500 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let len = (x >> 58) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|i| (x.rotate_left(i as u32 * 7) >> 13) as u8)
                .collect();
            check(&tok, &String::from_utf8_lossy(&bytes));
        }
    }
}
