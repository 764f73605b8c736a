//! Checkpoint save/load: round trips of every dtype (scalars, empty tensors, views), the exact
//! bytes the safetensors specification prescribes, metadata, atomic replacement, name rules and
//! the strict / non-strict checks.

use std::collections::BTreeMap;
use tessera_core::{DType, HostData, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint::{
    self, inspect, load, load_checked, save, Checkpoint, LoadMode, TensorSpec,
};
use tessera_nn::Error;

type T = Tensor<Cpu>;

fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A safetensors file built by hand from the specification: u64 LE header length, JSON header
/// padded with spaces to a multiple of 8, then the data.
fn spec_file(header_json: &str, data: &[u8]) -> Vec<u8> {
    let mut header = header_json.as_bytes().to_vec();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend_from_slice(data);
    out
}

fn sample_tensors(dev: &Cpu) -> Vec<(String, T)> {
    let f32s = T::from_vec((0..12).map(|i| i as f32 * 0.5 - 2.0).collect(), [3, 4], dev).unwrap();
    vec![
        ("layer.weight".to_string(), f32s.clone()),
        ("layer.weight_t".to_string(), f32s.transpose(0, 1).unwrap()),
        (
            "f64.values".to_string(),
            T::from_vec(vec![1e-300f64, -2.5, f64::MAX, 0.0], [2, 1, 2], dev).unwrap(),
        ),
        ("step".to_string(), T::scalar(i64::MIN + 7, dev).unwrap()),
        (
            "indices".to_string(),
            T::from_vec(vec![0i64, -1, i64::MAX, 42], [4], dev).unwrap(),
        ),
        (
            "mask".to_string(),
            T::from_vec(vec![1u8, 0, 0, 1, 1, 0], [2, 3], dev).unwrap(),
        ),
        (
            "empty".to_string(),
            T::zeros([0, 3], DType::F32, dev).unwrap(),
        ),
        (
            "half.values".to_string(),
            T::from_vec(vec![0.1, -65504.0, 6e-8, f64::INFINITY], [4], dev)
                .unwrap()
                .to_dtype(DType::F16)
                .unwrap(),
        ),
        (
            "bf16.values_t".to_string(),
            T::from_vec(vec![0.1, -3e38, 1e-40, 7.0, 1.0, 2.0], [2, 3], dev)
                .unwrap()
                .to_dtype(DType::BF16)
                .unwrap()
                .transpose(0, 1)
                .unwrap(),
        ),
    ]
}

#[test]
fn every_dtype_and_shape_round_trips_with_metadata() {
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let tensors = sample_tensors(&dev);
    let metadata = meta(&[("optimizer", "adam"), ("step", "1200")]);
    save(&path, tensors.iter().map(|(n, t)| (n, t)), &metadata).unwrap();

    let loaded = load(&path, &dev).unwrap();
    assert_eq!(loaded.metadata, metadata);
    assert_eq!(loaded.tensors.len(), tensors.len());
    for (name, original) in &tensors {
        let got = loaded.get(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(got.dims(), original.dims(), "{name}");
        assert_eq!(got.dtype(), original.dtype(), "{name}");
        assert_eq!(
            got.to_host().unwrap(),
            original.to_host().unwrap(),
            "{name}"
        );
    }
    // The transposed view was stored in its logical (row-major) order.
    let t = loaded
        .get("layer.weight_t")
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(&t[..4], &[-2.0, 0.0, 2.0, -1.5]);
}

#[test]
fn bytes_follow_the_safetensors_specification() {
    let dev = Cpu::new();
    let w = T::from_vec(vec![1.0f32, -2.0], [2], &dev).unwrap();
    let bytes = checkpoint::serialize([("w", &w)], &BTreeMap::new()).unwrap();
    let mut data = 1.0f32.to_le_bytes().to_vec();
    data.extend((-2.0f32).to_le_bytes());
    let expected = spec_file(
        r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
        &data,
    );
    assert_eq!(bytes, expected);
}

#[test]
fn hand_written_file_loads() {
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hand.safetensors");
    let mut data = Vec::new();
    data.extend(7i64.to_le_bytes());
    data.extend((-3i64).to_le_bytes());
    data.extend(0.25f64.to_le_bytes());
    data.extend([1u8, 0, 1]);
    let header = r#"{"__metadata__":{"epoch":"3"},"mask":{"dtype":"BOOL","shape":[3],"data_offsets":[24,27]},"ids":{"dtype":"I64","shape":[2,1],"data_offsets":[0,16]},"lr":{"dtype":"F64","shape":[],"data_offsets":[16,24]}}"#;
    std::fs::write(&path, spec_file(header, &data)).unwrap();
    let ck = load(&path, &dev).unwrap();
    assert_eq!(ck.metadata, meta(&[("epoch", "3")]));
    assert_eq!(ck.get("ids").unwrap().dims(), &[2, 1]);
    assert_eq!(ck.get("ids").unwrap().to_vec::<i64>().unwrap(), vec![7, -3]);
    assert_eq!(ck.get("lr").unwrap().dims(), &[] as &[usize]);
    assert_eq!(ck.get("lr").unwrap().to_scalar::<f64>().unwrap(), 0.25);
    assert_eq!(
        ck.get("mask").unwrap().to_host().unwrap(),
        HostData::Bool(vec![1, 0, 1])
    );
    let info = inspect(&path).unwrap();
    assert_eq!(
        info.tensors.values().cloned().collect::<Vec<_>>(),
        vec![
            TensorSpec::new("ids", [2, 1], DType::I64),
            TensorSpec::new("lr", [], DType::F64),
            TensorSpec::new("mask", [3], DType::Bool),
        ]
    );
}

#[test]
fn unsupported_dtype_in_a_file_is_an_error_naming_the_tensor() {
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("int32.safetensors");
    let header = r#"{"n":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}"#;
    std::fs::write(&path, spec_file(header, &[1, 0, 0, 0])).unwrap();
    let err = load(&path, &dev).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("'n'") && msg.contains("I32"), "{msg}");
}

#[test]
fn hand_written_16_bit_tensors_load_with_their_dtypes() {
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("half.safetensors");
    // f16 0x3c00 = 1, 0x4000 = 2; bf16 0x3f80 = 1, 0xc020 = -2.5 (little-endian bytes).
    let header = r#"{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}}"#;
    std::fs::write(&path, spec_file(header, &[0, 60, 0, 64, 128, 63, 32, 192])).unwrap();
    let ck = load(&path, &dev).unwrap();
    assert_eq!(ck.get("h").unwrap().dtype(), DType::F16);
    assert_eq!(ck.get("h").unwrap().to_vec_f64().unwrap(), vec![1.0, 2.0]);
    assert_eq!(ck.get("b").unwrap().dtype(), DType::BF16);
    assert_eq!(ck.get("b").unwrap().to_vec_f64().unwrap(), vec![1.0, -2.5]);
    // And the bytes written are the same ones.
    let bytes = checkpoint::serialize([("b", ck.get("b").unwrap())], &BTreeMap::new()).unwrap();
    let expected = spec_file(
        r#"{"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}"#,
        &[128, 63, 32, 192],
    );
    assert_eq!(bytes, expected);
}

#[test]
fn a_16_bit_model_saves_and_loads_in_its_dtype() {
    use tessera_core::Generator;
    use tessera_nn::layers::LinearConfig;
    use tessera_nn::Module;
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bf16.safetensors");
    let config = LinearConfig::new(3, 2).dtype(DType::BF16);
    let a = config.init(&dev, &mut Generator::new(1)).unwrap();
    a.save(&path).unwrap();
    let specs: Vec<DType> = inspect(&path)
        .unwrap()
        .tensors
        .values()
        .map(|s| s.dtype)
        .collect();
    assert_eq!(specs, vec![DType::BF16, DType::BF16]);
    let b = config.init(&dev, &mut Generator::new(2)).unwrap();
    b.load(&path).unwrap();
    for ((na, ta), (_, tb)) in a.state_dict().into_iter().zip(b.state_dict()) {
        assert_eq!(tb.dtype(), DType::BF16, "{na}");
        assert_eq!(ta.to_host().unwrap(), tb.to_host().unwrap(), "{na}");
    }
    // An f32 model does not silently take bf16 values: the dtype mismatch is an error.
    let f32_model = LinearConfig::new(3, 2)
        .init(&dev, &mut Generator::new(3))
        .unwrap();
    let err = f32_model.load(&path).unwrap_err();
    assert!(err.to_string().contains("bf16"), "{err}");
}

#[test]
fn saving_replaces_the_file_atomically_and_leaves_no_temporary() {
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ck.safetensors");
    let a = T::from_vec(vec![1.0f32; 4], [4], &dev).unwrap();
    let b = T::from_vec(vec![2.0f64; 2], [1, 2], &dev).unwrap();
    save(&path, [("a", &a)], &meta(&[("step", "1")])).unwrap();
    save(&path, [("b", &b)], &meta(&[("step", "2")])).unwrap();
    let ck = load(&path, &dev).unwrap();
    assert_eq!(ck.tensors.keys().collect::<Vec<_>>(), vec!["b"]);
    assert_eq!(ck.metadata["step"], "2");
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, vec![std::ffi::OsString::from("ck.safetensors")]);

    // A failed save (the folder does not exist) reports the path and creates nothing.
    let bad = dir.path().join("missing-folder").join("ck.safetensors");
    let err = save(&bad, [("a", &a)], &BTreeMap::new()).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("missing-folder"), "{err}");

    // Saving over a folder fails and leaves the folder and no temporary behind.
    let folder = dir.path().join("a-folder");
    std::fs::create_dir(&folder).unwrap();
    assert!(save(&folder, [("a", &a)], &BTreeMap::new()).is_err());
    assert!(folder.is_dir());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn invalid_or_duplicate_names_are_rejected_by_name() {
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.safetensors");
    let a = T::from_vec(vec![1.0f32], [1], &dev).unwrap();
    for (names, needle) in [
        (vec![""], "''"),
        (vec!["__metadata__"], "__metadata__"),
        (vec!["w", "w"], "'w' is given twice"),
    ] {
        let err = save(&path, names.iter().map(|n| (*n, &a)), &BTreeMap::new()).unwrap_err();
        assert!(matches!(err, Error::Checkpoint { .. }), "{err:?}");
        assert!(err.to_string().contains(needle), "{err}");
    }
    assert!(!path.exists());
}

fn write_model(dev: &Cpu) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let w = T::zeros([10, 784], DType::F32, dev).unwrap();
    let b = T::zeros([10], DType::F32, dev).unwrap();
    let step = T::scalar(5i64, dev).unwrap();
    save(
        &path,
        [("fc.weight", &w), ("fc.bias", &b), ("step", &step)],
        &BTreeMap::new(),
    )
    .unwrap();
    (dir, path)
}

fn expected() -> Vec<TensorSpec> {
    vec![
        TensorSpec::new("fc.weight", [10, 784], DType::F32),
        TensorSpec::new("fc.bias", [10], DType::F32),
        TensorSpec::new("step", [], DType::I64),
    ]
}

#[test]
fn strict_load_accepts_an_exact_match_only() {
    let dev = Cpu::new();
    let (_dir, path) = write_model(&dev);
    let (ck, report) = load_checked(&path, &dev, &expected(), LoadMode::Strict).unwrap();
    assert!(report.is_complete());
    assert_eq!(ck.tensors.len(), 3);

    let mut missing = expected();
    missing.push(TensorSpec::new("fc2.weight", [3, 3], DType::F32));
    let err = load_checked(&path, &dev, &missing, LoadMode::Strict).unwrap_err();
    assert!(
        err.to_string().contains("missing tensors: 'fc2.weight'"),
        "{err}"
    );

    let extra = &expected()[..2];
    let err = load_checked(&path, &dev, extra, LoadMode::Strict).unwrap_err();
    assert!(
        err.to_string().contains("unexpected tensors: 'step'"),
        "{err}"
    );

    let mut shape = expected();
    shape[0].dims = vec![10, 785];
    let err = load_checked(&path, &dev, &shape, LoadMode::Strict).unwrap_err();
    assert!(matches!(err, Error::Checkpoint { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("'fc.weight'") && msg.contains("[10, 784]") && msg.contains("[10, 785]"),
        "{msg}"
    );

    let mut dtype = expected();
    dtype[2].dtype = DType::F64;
    let err = load_checked(&path, &dev, &dtype, LoadMode::Strict).unwrap_err();
    assert!(err.to_string().contains("'step' is i64"), "{err}");

    let mut twice = expected();
    twice.push(expected()[1].clone());
    let err = load_checked(&path, &dev, &twice, LoadMode::NonStrict).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
}

#[test]
fn non_strict_load_lists_missing_and_skipped_tensors() {
    let dev = Cpu::new();
    let (_dir, path) = write_model(&dev);
    let wanted = vec![
        TensorSpec::new("fc.weight", [10, 784], DType::F32),
        TensorSpec::new("head.weight", [2, 10], DType::F32),
    ];
    let (ck, report) = load_checked(&path, &dev, &wanted, LoadMode::NonStrict).unwrap();
    assert_eq!(report.missing, vec!["head.weight"]);
    assert_eq!(report.unexpected, vec!["fc.bias", "step"]);
    assert_eq!(ck.tensors.keys().collect::<Vec<_>>(), vec!["fc.weight"]);
    // A shape mismatch is never tolerated.
    let wrong = vec![TensorSpec::new("fc.bias", [11], DType::F32)];
    let err = load_checked(&path, &dev, &wrong, LoadMode::NonStrict).unwrap_err();
    assert!(err.to_string().contains("'fc.bias'"), "{err}");
}

#[test]
fn checkpoint_value_saves_and_checks_itself() {
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.safetensors");
    let mut ck = Checkpoint::new();
    ck.tensors
        .insert("x".into(), T::from_vec(vec![3i64, 4], [2], &dev).unwrap());
    ck.metadata.insert("note".into(), "hello".into());
    ck.save(&path).unwrap();
    let back = load(&path, &dev).unwrap();
    assert_eq!(back.specs(), ck.specs());
    assert_eq!(back.metadata, ck.metadata);
    assert!(back
        .check(&[TensorSpec::new("x", [2], DType::I64)], LoadMode::Strict)
        .unwrap()
        .is_complete());
    assert!(back
        .check(&[TensorSpec::new("x", [3], DType::I64)], LoadMode::Strict)
        .is_err());
}
