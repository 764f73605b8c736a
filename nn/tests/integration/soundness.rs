//! Regression tests of issue 11 in `nn`: absurd layer sizes, zero features, fan-in
//! overflow, checkpoint headers `save` would never write, and gzip IDX files that decompress
//! to far more than their header claims. Each is a typed error, never a panic or an abort.
//! (The allocation failures of huge but addressable layers are in `fuzz/tests`, which runs
//! them under a memory limit.)

use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;
use tessera_core::{DType, Error as TensorError, Generator};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint;
use tessera_nn::data::idx::{encode_idx, read_idx};
use tessera_nn::init::fan_in_and_fan_out;
use tessera_nn::layers::{BatchNormConfig, Conv2dConfig, EmbeddingConfig, LinearConfig};
use tessera_nn::Error;

fn size_overflow<T>(r: tessera_core::Result<T>) -> bool {
    matches!(r, Err(TensorError::SizeOverflow { .. }))
}

#[test]
fn layers_too_large_to_address_are_size_overflow_errors() {
    let dev = Cpu::new();
    let mut g = Generator::new(0);
    let huge = 1 << 40;
    assert!(size_overflow(
        LinearConfig::new(huge, huge).init(&dev, &mut g)
    ));
    assert!(size_overflow(
        EmbeddingConfig::new(huge, huge).init(&dev, &mut g)
    ));
    let config = Conv2dConfig::new(huge, 3, (huge, 3));
    assert!(size_overflow(config.init(&dev, &mut g)));
    let config = Conv2dConfig::new(4, 1, (2, usize::MAX - 1));
    assert!(size_overflow(config.init(&dev, &mut g)));
    assert!(size_overflow(
        BatchNormConfig::new(usize::MAX).init_1d(&dev)
    ));
    assert!(fan_in_and_fan_out(&[3, usize::MAX, usize::MAX]).is_err());
}

#[test]
fn batch_norm_needs_at_least_one_feature() {
    let dev = Cpu::new();
    for r in [
        BatchNormConfig::new(0).init_1d(&dev).map(|_| ()),
        BatchNormConfig::new(0)
            .dtype(DType::F64)
            .init_2d(&dev)
            .map(|_| ()),
    ] {
        let err = r.unwrap_err();
        assert!(
            matches!(err, TensorError::InvalidArgument { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("num_features"), "{err}");
    }
}

/// A safetensors file with `header` as its JSON header and `data` after it.
fn safetensors(header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

fn load_error(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.safetensors");
    std::fs::write(&path, bytes).unwrap();
    let inspect = checkpoint::inspect(&path);
    assert!(matches!(inspect, Err(Error::Format { .. })), "{inspect:?}");
    match checkpoint::load(&path, &Cpu::new()) {
        Err(e @ Error::Format { .. }) => e.to_string(),
        other => panic!("expected a Format error, got {other:?}"),
    }
}

#[test]
fn checkpoint_headers_save_would_never_write_are_rejected() {
    let entry = r#"{"dtype":"F32","shape":[1],"data_offsets":[0,4]}"#;
    let duplicate = format!(r#"{{"a":{entry},"a":{entry}}}"#);
    let msg = load_error(&safetensors(&duplicate, &[0; 4]));
    assert!(msg.contains("'a' appears twice"), "{msg}");

    let empty = format!(r#"{{"":{entry}}}"#);
    let msg = load_error(&safetensors(&empty, &[0; 4]));
    assert!(msg.contains("empty name"), "{msg}");

    let ones = vec!["1"; 100_000].join(",");
    let deep = format!(r#"{{"deep":{{"dtype":"F32","shape":[{ones}],"data_offsets":[0,4]}}}}"#);
    let msg = load_error(&safetensors(&deep, &[0; 4]));
    assert!(msg.contains("rank 100000"), "{msg}");

    // A well-formed header with the metadata entry still loads.
    let fine = format!(r#"{{"__metadata__":{{"k":"v"}},"a":{entry}}}"#);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fine.safetensors");
    std::fs::write(&path, safetensors(&fine, &1f32.to_le_bytes())).unwrap();
    let ck = checkpoint::load(&path, &Cpu::new()).unwrap();
    assert_eq!(ck.get("a").unwrap().to_vec::<f32>().unwrap(), vec![1.0]);
}

/// `members` gzip members of `block` zero bytes each, concatenated (a valid multi-member gzip
/// stream that decompresses to `members * block` bytes from a few bytes per member).
fn zeros_gzip(members: usize, block: usize) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::best());
    enc.write_all(&vec![0u8; block]).unwrap();
    let member = enc.finish().unwrap();
    member.repeat(members)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

#[test]
fn a_gzip_idx_file_is_checked_against_its_header_while_it_streams() {
    let dir = tempfile::tempdir().unwrap();
    // A 16-byte array followed by 256 MiB of zeros, from a file of about 260 KB: the reader
    // stops counting the excess after 64 MiB and never holds more than the 16 bytes.
    let mut bomb = gzip(&encode_idx(&[16], &[7; 16]).unwrap());
    bomb.extend(zeros_gzip(256, 1 << 20));
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    let path = dir.path().join("bomb-idx1-ubyte.gz");
    std::fs::write(&path, &bomb).unwrap();
    let msg = read_idx(&path).unwrap_err().to_string();
    assert!(msg.contains("trailing"), "{msg}");

    // A header claiming 4 GiB over a stream of 1 MiB: truncated, found after reading 1 MiB.
    let mut short = gzip(&[0, 0, 8, 2, 0, 1, 0, 0, 0, 1, 0, 0]);
    short.extend(zeros_gzip(1, 1 << 20));
    let path = dir.path().join("short-idx2-ubyte.gz");
    std::fs::write(&path, &short).unwrap();
    let msg = read_idx(&path).unwrap_err().to_string();
    assert!(
        msg.contains("truncated") && msg.contains("need 4294967296"),
        "{msg}"
    );

    // The same stream with an honest header reads back.
    let mut honest = gzip(&[0, 0, 8, 1, 0, 16, 0, 0]);
    honest.extend(zeros_gzip(1, 1 << 20));
    let path = dir.path().join("honest-idx1-ubyte.gz");
    std::fs::write(&path, &honest).unwrap();
    let a = read_idx(&path).unwrap();
    assert_eq!(a.dims, vec![1 << 20]);
    assert!(a.data.iter().all(|&b| b == 0));
}
