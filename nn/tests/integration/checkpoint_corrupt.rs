//! Corrupt checkpoint files: every truncation, byte flips across the header, and targeted
//! corruptions give errors naming the file, never panics.

use std::collections::BTreeMap;
use std::path::Path;
use tessera_core::{DType, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint::{inspect, load, save};
use tessera_nn::Error;

type T = Tensor<Cpu>;

fn good_file(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let dev = Cpu::new();
    let path = dir.join("good.safetensors");
    let w = T::from_vec((0..6).map(|i| i as f32).collect(), [2, 3], &dev).unwrap();
    let ids = T::from_vec(vec![1i64, 2], [2], &dev).unwrap();
    let mask = T::from_vec(vec![1u8, 0, 1], [3], &dev).unwrap();
    let mut metadata = BTreeMap::new();
    metadata.insert("step".to_string(), "10".to_string());
    save(
        &path,
        [("w", &w), ("ids", &ids), ("mask", &mask)],
        &metadata,
    )
    .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

fn header_len(bytes: &[u8]) -> usize {
    u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize
}

fn assert_format_error<X: std::fmt::Debug>(result: tessera_nn::Result<X>, path: &Path, what: &str) {
    match result {
        Err(e @ Error::Format { .. }) => assert!(
            e.to_string().contains(&path.display().to_string()),
            "{what}: message does not name the file: {e}"
        ),
        other => panic!("{what}: expected a Format error, got {other:?}"),
    }
}

#[test]
fn every_truncation_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bytes) = good_file(dir.path());
    let dev = Cpu::new();
    let path = dir.path().join("cut.safetensors");
    for cut in 0..bytes.len() {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        assert_format_error(load(&path, &dev), &path, &format!("cut at {cut}"));
        assert_format_error(inspect(&path), &path, &format!("inspect cut at {cut}"));
    }
    // Trailing garbage is rejected too.
    let mut longer = bytes.clone();
    longer.push(0);
    std::fs::write(&path, &longer).unwrap();
    assert_format_error(load(&path, &dev), &path, "one extra byte");
}

#[test]
fn flipping_any_header_byte_never_panics_and_is_mostly_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bytes) = good_file(dir.path());
    let dev = Cpu::new();
    let path = dir.path().join("flip.safetensors");
    let end = 8 + header_len(&bytes);
    let mut errors = 0;
    let mut total = 0;
    for at in 0..end {
        for mask in [0x01u8, 0x20, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[at] ^= mask;
            std::fs::write(&path, &bad).unwrap();
            total += 1;
            // A flip may still leave a valid file (e.g. a renamed tensor or metadata value):
            // only an error or a consistent load is acceptable.
            match load(&path, &dev) {
                Err(Error::Format { .. }) => errors += 1,
                Err(other) => panic!("byte {at} ^ {mask:#x}: unexpected error kind {other:?}"),
                Ok(ck) => {
                    assert_eq!(ck.tensors.len(), 3, "byte {at} ^ {mask:#x}");
                    let numel: usize = ck.tensors.values().map(|t| t.numel()).sum();
                    assert_eq!(numel, 11, "byte {at} ^ {mask:#x}");
                }
            }
        }
    }
    // Nearly every flip breaks JSON syntax, a number, a dtype or the offsets.
    println!("{errors} of {total} header flips were caught");
    assert!(
        errors * 10 > total * 7,
        "{errors} of {total} flips were caught"
    );
}

#[test]
fn targeted_corruptions_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bytes) = good_file(dir.path());
    let dev = Cpu::new();
    let path = dir.path().join("bad.safetensors");
    let end = 8 + header_len(&bytes);
    let header = String::from_utf8(bytes[8..end].to_vec()).unwrap();
    let with_header = |h: &str| {
        assert_eq!(h.len(), header.len(), "keep the header length");
        let mut b = bytes.clone();
        b[8..end].copy_from_slice(h.as_bytes());
        b
    };
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("shape", with_header(&header.replace("[2,3]", "[3,3]")), ""),
        (
            "dtype",
            with_header(&header.replacen("\"F32\"", "\"I32\"", 1)),
            "'w'",
        ),
        (
            "half",
            with_header(&header.replacen("\"F32\"", "\"F16\"", 1)),
            "",
        ),
        (
            "offsets",
            with_header(&header.replacen("[0,", "[1,", 1)),
            "",
        ),
        (
            "not utf-8",
            with_header(&header.replacen('{', "\u{7f}", 1)),
            "",
        ),
        ("empty", Vec::new(), ""),
        ("garbage", b"this is not a checkpoint at all".to_vec(), ""),
        (
            "huge header length",
            {
                let mut b = bytes.clone();
                b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
                b
            },
            "",
        ),
        (
            "header length past the end",
            {
                let mut b = bytes.clone();
                b[..8].copy_from_slice(&((bytes.len() as u64) + 8).to_le_bytes());
                b
            },
            "",
        ),
    ];
    // A bool byte other than 0/1: the mask is the last tensor (BOOL sorts last), 3 bytes.
    let mut bad_bool = bytes.clone();
    let n = bad_bool.len();
    bad_bool[n - 2] = 7;
    cases.push(("bool byte", bad_bool, "'mask'"));
    for (what, content, needle) in cases {
        std::fs::write(&path, &content).unwrap();
        let result = load(&path, &dev);
        if let Err(e) = &result {
            assert!(e.to_string().contains(needle), "{what}: {e}");
        }
        assert_format_error(result, &path, what);
    }
    assert_eq!(
        load(dir.path().join("good.safetensors"), &dev)
            .unwrap()
            .tensors["w"]
            .dtype(),
        DType::F32
    );
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let err = load(Path::new("/no/such/dir/ck.safetensors"), &Cpu::new()).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(
        err.to_string().contains("/no/such/dir/ck.safetensors"),
        "{err}"
    );
}
