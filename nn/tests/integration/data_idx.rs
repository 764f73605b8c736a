//! IDX reader and MNIST-like folder loading: round trips through files written here, every
//! supported file name, and errors (never panics) on missing, truncated or corrupt files.

use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;
use std::path::{Path, PathBuf};
use tessera_nn::data::idx::{encode_idx, parse_idx, read_idx, read_idx_with_rank};
use tessera_nn::data::{find_idx_file, MnistLike, Split};
use tessera_nn::Error;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The error must be a `Format` error naming `path`.
fn assert_format_error(result: tessera_nn::Result<impl std::fmt::Debug>, path: &Path) -> String {
    match result {
        Err(e @ Error::Format { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&path.display().to_string()),
                "message does not name the file: {msg}"
            );
            msg
        }
        other => panic!(
            "expected a Format error for {}, got {other:?}",
            path.display()
        ),
    }
}

#[test]
fn parses_hand_written_label_file() {
    // magic 0x00000801, one dim of 3, then 3 bytes.
    let bytes = [0u8, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9];
    let a = parse_idx(&bytes, Path::new("x")).unwrap();
    assert_eq!(a.dims, vec![3]);
    assert_eq!(a.data, vec![7, 8, 9]);
}

#[test]
fn parses_hand_written_image_file_with_big_endian_dims() {
    // magic 0x00000803, dims [2, 1, 258] (258 = 0x0102 checks the byte order).
    let mut bytes = vec![0u8, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 1, 2];
    bytes.extend((0..516).map(|i| (i % 251) as u8));
    let a = parse_idx(&bytes, Path::new("x")).unwrap();
    assert_eq!(a.dims, vec![2, 1, 258]);
    assert_eq!(a.data.len(), 516);
    assert_eq!(a.data[515], (515 % 251) as u8);
}

#[test]
fn encode_matches_the_format_byte_for_byte() {
    let bytes = encode_idx(&[2, 1, 2], &[1, 2, 3, 4]).unwrap();
    assert_eq!(
        bytes,
        vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 1, 2, 3, 4]
    );
    assert!(encode_idx(&[3], &[1, 2]).is_err());
    assert!(encode_idx(&[], &[]).is_err());
}

#[test]
fn round_trip_raw_and_gzip_under_both_name_styles() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..3 * 4 * 5).map(|i| (i * 7 % 256) as u8).collect();
    let raw = encode_idx(&[3, 4, 5], &data).unwrap();
    let names = [
        ("train-images-idx3-ubyte", false),
        ("train-images-idx3-ubyte.gz", true),
        ("train-images.idx3-ubyte", false),
        ("train-images.idx3-ubyte.gz", true),
    ];
    for (name, compressed) in names {
        let sub = dir.path().join(name.replace('.', "_"));
        std::fs::create_dir(&sub).unwrap();
        let bytes = if compressed { gzip(&raw) } else { raw.clone() };
        let path = write(&sub, name, &bytes);
        assert_eq!(
            find_idx_file(&sub, "train-images"),
            Some(path.clone()),
            "{name}"
        );
        let a = read_idx(&path).unwrap();
        assert_eq!(a.dims, vec![3, 4, 5], "{name}");
        assert_eq!(a.data, data, "{name}");
        assert!(find_idx_file(&sub, "t10k-images").is_none());
    }
}

#[test]
fn gzip_is_detected_by_content_not_name() {
    let dir = tempfile::tempdir().unwrap();
    let raw = encode_idx(&[4], &[1, 2, 3, 4]).unwrap();
    let path = write(dir.path(), "labels-no-extension", &gzip(&raw));
    assert_eq!(read_idx(&path).unwrap().data, vec![1, 2, 3, 4]);
}

#[test]
fn truncated_raw_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let raw = encode_idx(&[2, 3, 3], &[5; 18]).unwrap();
    for cut in [0, 1, 3, 4, 7, 10, 15, 16, 17, raw.len() - 1] {
        let path = write(dir.path(), &format!("cut{cut}"), &raw[..cut]);
        assert_format_error(read_idx(&path), &path);
    }
}

#[test]
fn truncated_or_corrupt_gzip_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..2000).map(|i| (i * 31 % 256) as u8).collect();
    let gz = gzip(&encode_idx(&[2000], &data).unwrap());
    for cut in [2, 10, gz.len() / 2, gz.len() - 8, gz.len() - 1] {
        let path = write(dir.path(), &format!("cut{cut}.gz"), &gz[..cut]);
        assert_format_error(read_idx(&path), &path);
    }
    // Flipping any byte of the compressed body or trailer is caught (deflate structure or CRC);
    // flips in the optional header fields may decode fine, so only require no panic there.
    for at in 10..gz.len() {
        let mut bad = gz.clone();
        bad[at] ^= 0x55;
        let path = write(dir.path(), "flipped.gz", &bad);
        let result = read_idx(&path);
        if let Ok(a) = &result {
            assert_ne!(a.data, data, "corruption at byte {at} went unnoticed");
        }
    }
    let path = write(dir.path(), "flip-crc.gz", &{
        let mut bad = gz.clone();
        let n = bad.len();
        bad[n - 6] ^= 1; // inside the CRC32
        bad
    });
    assert_format_error(read_idx(&path), &path);
}

#[test]
fn wrong_magic_dtype_rank_or_length_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = encode_idx(&[2, 2, 2], &[1; 8]).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "magic",
            {
                let mut b = good.clone();
                b[0] = 0x12;
                b
            },
            "magic",
        ),
        (
            "dtype-f32",
            {
                let mut b = good.clone();
                b[2] = 0x0D;
                b
            },
            "0x0d",
        ),
        ("rank0", vec![0, 0, 8, 0], "rank 0"),
        (
            "trailing",
            {
                let mut b = good.clone();
                b.push(0);
                b
            },
            "trailing",
        ),
        (
            "short-payload",
            good[..good.len() - 3].to_vec(),
            "truncated",
        ),
        (
            "huge-dims",
            vec![
                0, 0, 8, 3, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
            ],
            "overflow",
        ),
        (
            "big-dims",
            vec![0, 0, 8, 2, 0, 1, 0, 0, 0, 1, 0, 0, 1, 2, 3],
            "need 4294967296",
        ),
        ("text", b"hello world, not idx".to_vec(), "magic"),
    ];
    for (name, bytes, expected_text) in cases {
        let path = write(dir.path(), name, &bytes);
        let msg = assert_format_error(read_idx(&path), &path);
        assert!(msg.contains(expected_text), "{name}: {msg}");
    }
    let path = write(dir.path(), "rank-check", &good);
    let msg = assert_format_error(read_idx_with_rank(&path, 1), &path);
    assert!(msg.contains("rank 1"), "{msg}");
}

#[test]
fn missing_file_is_an_io_error_naming_it() {
    let path = Path::new("/nonexistent/definitely/train-images-idx3-ubyte");
    match read_idx(path) {
        Err(e @ Error::Io { .. }) => assert!(e.to_string().contains("definitely")),
        other => panic!("expected Io, got {other:?}"),
    }
}

/// Writes a complete MNIST-like folder: `n_train`/`n_test` images of 3x2 pixels.
fn write_split(dir: &Path, prefix: &str, n: usize, gz: bool, dotted: bool) -> (Vec<u8>, Vec<u8>) {
    let images: Vec<u8> = (0..n * 6).map(|i| (i * 13 % 256) as u8).collect();
    let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
    let sep = if dotted { '.' } else { '-' };
    let ext = if gz { ".gz" } else { "" };
    let enc = |dims: &[usize], d: &[u8]| {
        let raw = encode_idx(dims, d).unwrap();
        if gz {
            gzip(&raw)
        } else {
            raw
        }
    };
    write(
        dir,
        &format!("{prefix}-images{sep}idx3-ubyte{ext}"),
        &enc(&[n, 3, 2], &images),
    );
    write(
        dir,
        &format!("{prefix}-labels{sep}idx1-ubyte{ext}"),
        &enc(&[n], &labels),
    );
    (images, labels)
}

#[test]
fn mnist_like_folder_loads_both_splits() {
    let dir = tempfile::tempdir().unwrap();
    let (train_images, train_labels) = write_split(dir.path(), "train", 12, true, false);
    let (test_images, test_labels) = write_split(dir.path(), "t10k", 5, false, true);
    let train = MnistLike::load(dir.path(), Split::Train).unwrap();
    assert_eq!(train.image_dims(), [12, 3, 2]);
    assert_eq!(train.images(), &train_images[..]);
    assert_eq!(train.labels(), &train_labels[..]);
    assert_eq!(train.image(1).unwrap(), &train_images[6..12]);
    assert_eq!(train.label(11), Some(1));
    assert!(train.image(12).is_none());
    assert_eq!(train.class_histogram(), vec![2, 2, 1, 1, 1, 1, 1, 1, 1, 1]);
    let test = MnistLike::load(dir.path(), Split::Test).unwrap();
    assert_eq!(test.len(), 5);
    assert_eq!(test.images(), &test_images[..]);
    assert_eq!(test.labels(), &test_labels[..]);
}

#[test]
fn missing_folder_or_file_says_how_to_install_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("nowhere");
    for (path, split) in [(absent.as_path(), Split::Train), (dir.path(), Split::Test)] {
        match MnistLike::load(path, split) {
            Err(e @ Error::MissingData { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("apt-get install dataset-fashion-mnist"),
                    "{msg}"
                );
                assert!(msg.contains("--data"), "{msg}");
            }
            other => panic!("expected MissingData, got {other:?}"),
        }
    }
    // Images present, labels missing: the message names the labels stem.
    write_split(dir.path(), "train", 3, false, false);
    std::fs::remove_file(dir.path().join("train-labels-idx1-ubyte")).unwrap();
    let msg = MnistLike::load(dir.path(), Split::Train)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("train-labels"), "{msg}");
}

#[test]
fn image_and_label_counts_must_agree() {
    let dir = tempfile::tempdir().unwrap();
    write_split(dir.path(), "train", 4, false, false);
    write(
        dir.path(),
        "train-labels-idx1-ubyte",
        &encode_idx(&[3], &[0, 1, 2]).unwrap(),
    );
    let err = MnistLike::load(dir.path(), Split::Train).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    assert!(err.to_string().contains("3 labels"), "{err}");
}

#[test]
fn label_file_with_image_rank_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    write_split(dir.path(), "train", 2, false, false);
    write(
        dir.path(),
        "train-labels-idx1-ubyte",
        &encode_idx(&[2, 1, 1], &[0, 1]).unwrap(),
    );
    let err = MnistLike::load(dir.path(), Split::Train).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
}

#[test]
fn from_raw_validates_sizes() {
    assert!(MnistLike::from_raw(vec![0; 12], [2, 3], vec![1, 2]).is_ok());
    assert!(MnistLike::from_raw(vec![0; 11], [2, 3], vec![1, 2]).is_err());
    assert!(MnistLike::from_raw(vec![], [0, 3], vec![]).is_err());
    assert!(MnistLike::from_raw(vec![], [usize::MAX, 3], vec![1]).is_err());
}
