use tessera_tokenizer::Tokenizer;

#[test]
fn probe() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/hf/");
    for dir in ["tokenizer", "gpt2-tiny", "llama-tiny", "llama3-tiny"] {
        let t = Tokenizer::from_folder(format!("{root}{dir}")).unwrap();
        println!("{dir}: vocab {} special {:?}", t.vocab_size(), t.special_tokens());
        let cases = [
            "", " ", "  ", "\n\n\t", "hello world", " leading", "trailing ", "<|endoftext|>",
            "a<|endoftext|>b", "<|begin_of_text|>x", " <|endoftext|> ", "<|endoftext", "é", "日本語",
            "\u{FFFD}", "🦀🦀", "\u{0}", "\r\n", "ǅ", "a\u{301}", "ﬁ", "'s 're ", "   x   ",
            "<|endoftext|><|endoftext|>", "\u{10FFFF}", "\u{200B}",
        ];
        for s in cases {
            for add in [false, true] {
                let ids = t.encode(s, add).unwrap();
                let back = t.decode(&ids, false).unwrap();
                let back_skip = t.decode(&ids, true).unwrap();
                if back != s || back_skip != s {
                    println!("  {dir} add={add} {s:?} -> {ids:?} -> {back:?} / skip {back_skip:?}");
                }
            }
        }
        // random bytes lossy
        let mut x: u64 = 1;
        let mut bad = 0;
        for _ in 0..2000 {
            let len = (x % 40) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect();
            let s = String::from_utf8_lossy(&bytes).into_owned();
            let ids = t.encode(&s, false).unwrap();
            let back = t.decode(&ids, false).unwrap();
            if back != s { bad += 1; if bad < 4 { println!("  random {s:?} -> {back:?}"); } }
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        }
        println!("  random mismatches {bad}");
    }
}
