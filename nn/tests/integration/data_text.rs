//! Text data for language models: the character tokenizer and its saved vocabulary, corpora
//! read from files and folders (symlinks and binary files skipped, missing data explained), and
//! random windows of an interleaved train/validation split.

use tessera_core::Error;
use tessera_cpu::Cpu;
use tessera_nn::data::{CharTokenizer, SplitMix64, TextCorpus, TokenWindows, FORTUNES_DIR};

#[test]
fn the_vocabulary_round_trips_through_its_file() {
    let text = "Héllo, wörld!\n\t%\n— ∑ 🙂";
    let tok = CharTokenizer::from_text(text);
    let ids = tok.encode(text).unwrap();
    assert_eq!(tok.decode(&ids).unwrap(), text);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vocab.json");
    tok.save(&path).unwrap();
    let back = CharTokenizer::load(&path).unwrap();
    assert_eq!(back, tok);
    assert!(tok.decode(&[tok.vocab_size()]).is_err());
    let err = tok.encode("z").unwrap_err().to_string();
    assert!(err.contains("'z'"), "{err}");
    std::fs::write(&path, "{\"kind\": \"char\", \"tokens\": [\"a\", \"a\"]}").unwrap();
    assert!(matches!(
        CharTokenizer::load(&path),
        Err(Error::Format { .. })
    ));
}

#[test]
fn a_folder_is_read_in_name_order_without_links_or_binary_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("b.txt"), "second\n").unwrap();
    std::fs::write(root.join("a.txt"), "first\n").unwrap();
    std::fs::write(root.join("sub/c"), "third\n").unwrap();
    std::fs::write(root.join("a.dat"), [0xff, 0xfe, 0x00, 0x80]).unwrap();
    std::os::unix::fs::symlink(root.join("a.txt"), root.join("a.u8")).unwrap();
    let corpus = TextCorpus::load(root).unwrap();
    assert_eq!(corpus.text, "first\nsecond\nthird\n");
    assert_eq!(corpus.files.len(), 3);
    assert_eq!(corpus.skipped, [root.join("a.dat")]);
    assert_eq!(
        TextCorpus::load(root.join("b.txt")).unwrap().text,
        "second\n"
    );
}

#[test]
fn missing_text_names_what_to_install() {
    if !std::path::Path::new(FORTUNES_DIR).exists() {
        let err = TextCorpus::load(FORTUNES_DIR).unwrap_err().to_string();
        assert!(err.contains("apt-get install fortunes"), "{err}");
    }
    let err = TextCorpus::load("/nonexistent/tessera-text").unwrap_err();
    assert!(matches!(err, Error::MissingData { .. }), "{err}");
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        TextCorpus::load(empty.path()),
        Err(Error::MissingData { .. })
    ));
}

#[test]
fn the_default_corpus_reads_when_installed() {
    let Ok(corpus) = TextCorpus::load(FORTUNES_DIR) else {
        println!("skipped: {FORTUNES_DIR} not found (apt-get install fortunes)");
        return;
    };
    assert!(corpus.text.len() > 1_000_000, "{} bytes", corpus.text.len());
    assert!(corpus
        .skipped
        .iter()
        .all(|p| p.extension().is_some_and(|e| e == "dat")));
    let tok = CharTokenizer::from_text(&corpus.text);
    assert!(tok.vocab_size() < 300, "{}", tok.vocab_size());
}

#[test]
fn windows_and_the_split() {
    let tokens: Vec<usize> = (0..1000).map(|i| i % 97).collect();
    let (train, val) = TokenWindows::split(&tokens, 8, 100, 10).unwrap();
    // Ten segments of 100: the tenth held out.
    assert_eq!(train.tokens(), 900);
    assert_eq!(val.tokens(), 100);
    assert_eq!(train.count(), 9 * 92);
    let mut rng = SplitMix64::new(1);
    let starts = val.sample_starts(200, &mut rng).unwrap();
    assert!(
        starts.iter().all(|&s| (900..992).contains(&s)),
        "{starts:?}"
    );
    let starts = train.sample_starts(2000, &mut rng).unwrap();
    // No window crosses out of its segment.
    assert!(starts.iter().all(|&s| s % 100 < 92 && s < 900));
    let (x, y) = train.batch_at(&[0, 7], &Cpu::new()).unwrap();
    assert_eq!(x.dims(), [2, 8]);
    let (x, y) = (x.to_vec::<i64>().unwrap(), y.to_vec::<i64>().unwrap());
    assert_eq!(x[..8], [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(y[8..], [8, 9, 10, 11, 12, 13, 14, 15]);
    assert!(TokenWindows::new(&tokens[..8], 8).is_err());
}
