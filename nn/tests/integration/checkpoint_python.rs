//! Interoperability with the reference `safetensors` Python package (the loader PyTorch uses):
//! a file written here opens with `safetensors.numpy.load_file` with the same names, dtypes,
//! shapes and values, and a file written by Python loads here. Skipped, with the reason printed,
//! when `python3 -c "import safetensors.numpy"` fails (`pip install safetensors numpy`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use tessera_core::{HostData, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint::{load, save};

type T = Tensor<Cpu>;

fn python_safetensors_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import safetensors.numpy, numpy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        println!("skipped: python3 with the safetensors and numpy packages is not available (pip install safetensors numpy)");
    }
    ok
}

fn run_python(script: &str, path: &Path) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Per tensor: `name dtype shape checksum`, where the checksum is the sum of the elements
/// (as f64) weighted by their position + 1, so order and values both count.
const DESCRIBE: &str = r#"
import sys, numpy as np
from safetensors.numpy import load_file
from safetensors import safe_open
tensors = load_file(sys.argv[1])
for name in sorted(tensors):
    a = tensors[name]
    flat = a.reshape(-1).astype(np.float64)
    checksum = float(np.sum(flat * np.arange(1, flat.size + 1)))
    print(name, a.dtype.name, list(a.shape), repr(checksum))
with safe_open(sys.argv[1], framework="numpy") as f:
    meta = f.metadata() or {}
for k in sorted(meta):
    print("meta", k, meta[k])
"#;

fn rust_description(tensors: &BTreeMap<String, T>, metadata: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (name, t) in tensors {
        let dtype = match t.to_host().unwrap() {
            HostData::F32(_) => "float32",
            HostData::F64(_) => "float64",
            HostData::I64(_) => "int64",
            HostData::Bool(_) => "bool",
            HostData::F16(_) => "float16",
            HostData::BF16(_) => "bfloat16",
            other => panic!("no numpy name for {}", other.dtype()),
        };
        let checksum: f64 = t
            .to_vec_f64()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, &x)| x * (i + 1) as f64)
            .sum();
        out += &format!("{name} {dtype} {:?} {checksum:?}\n", t.dims());
    }
    for (k, v) in metadata {
        out += &format!("meta {k} {v}\n");
    }
    out
}

#[test]
fn file_written_here_opens_with_python_safetensors() {
    if !python_safetensors_available() {
        return;
    }
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("interop.safetensors");
    let mut tensors = BTreeMap::new();
    tensors.insert(
        "conv.weight".to_string(),
        T::from_vec(
            (0..24).map(|i| (i as f32) * 0.25 - 3.0).collect(),
            [2, 3, 2, 2],
            &dev,
        )
        .unwrap(),
    );
    tensors.insert(
        "stats.f64".to_string(),
        T::from_vec(vec![0.1f64, -7.5, 1e10], [3], &dev).unwrap(),
    );
    tensors.insert("optim.step".to_string(), T::scalar(123i64, &dev).unwrap());
    tensors.insert(
        "labels".to_string(),
        T::from_vec(vec![3i64, -1, 9, 0], [2, 2], &dev).unwrap(),
    );
    tensors.insert(
        "mask".to_string(),
        T::from_vec(vec![0u8, 1, 1, 0, 1], [5], &dev).unwrap(),
    );
    let mut metadata = BTreeMap::new();
    metadata.insert("optimizer".to_string(), "sgd".to_string());
    metadata.insert("step".to_string(), "123".to_string());
    save(&path, &tensors, &metadata).unwrap();

    let from_python = run_python(DESCRIBE, &path);
    let expected = rust_description(&tensors, &metadata);
    assert_eq!(from_python, expected);
    // Known values, independent of both implementations: conv.weight = 0.25 i - 3 for i < 24,
    // so sum((0.25 i - 3)(i + 1)) = 0.25 * 4600 - 3 * 300 = 250.
    assert!(
        from_python.contains("conv.weight float32 [2, 3, 2, 2] 250.0\n"),
        "{from_python}"
    );
}

#[test]
fn file_written_by_python_loads_here() {
    if !python_safetensors_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("from_python.safetensors");
    let script = r#"
import sys, numpy as np
from safetensors.numpy import save_file
save_file({
    "w": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
    "d": np.array([1.5, -2.25], dtype=np.float64),
    "i": np.array([[5], [-6]], dtype=np.int64),
    "b": np.array([True, False, True]),
}, sys.argv[1], metadata={"source": "numpy"})
"#;
    run_python(script, &path);
    let ck = load(&path, &Cpu::new()).unwrap();
    assert_eq!(ck.metadata["source"], "numpy");
    let w = &ck.tensors["w"];
    assert_eq!(w.dims(), &[2, 3]);
    assert_eq!(
        w.to_vec::<f32>().unwrap(),
        vec![0.0, 0.25, 0.5, 0.75, 1.0, 1.25]
    );
    assert_eq!(ck.tensors["d"].to_vec::<f64>().unwrap(), vec![1.5, -2.25]);
    assert_eq!(ck.tensors["i"].dims(), &[2, 1]);
    assert_eq!(ck.tensors["i"].to_vec::<i64>().unwrap(), vec![5, -6]);
    assert_eq!(ck.tensors["b"].to_vec::<u8>().unwrap(), vec![1, 0, 1]);
}

fn python_torch_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import torch, safetensors.torch"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        println!("skipped: python3 with torch and safetensors is not available (pip install torch safetensors)");
    }
    ok
}

/// Per tensor, in name order: `name dtype shape bits...`, the bits being the 16-bit patterns
/// as PyTorch holds them (`view(torch.int16)`, as unsigned).
const DESCRIBE_TORCH_BITS: &str = r#"
import sys, torch
from safetensors.torch import load_file
tensors = load_file(sys.argv[1])
for name in sorted(tensors):
    t = tensors[name]
    bits = [int(b) & 0xFFFF for b in t.reshape(-1).view(torch.int16).tolist()]
    print(name, str(t.dtype).replace("torch.", ""), list(t.shape), *bits)
"#;

fn bits_line(name: &str, t: &T) -> String {
    let (dtype, bits): (&str, Vec<u16>) = match t.to_host().unwrap() {
        HostData::F16(v) => ("float16", v.iter().map(|x| x.to_bits()).collect()),
        HostData::BF16(v) => ("bfloat16", v.iter().map(|x| x.to_bits()).collect()),
        other => panic!("not a 16-bit tensor: {}", other.dtype()),
    };
    let bits: Vec<String> = bits.iter().map(|b| b.to_string()).collect();
    format!("{name} {dtype} {:?} {}\n", t.dims(), bits.join(" "))
}

#[test]
fn bf16_and_f16_files_written_by_pytorch_load_here_bit_for_bit() {
    if !python_torch_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("from_torch.safetensors");
    // Values PyTorch rounds itself (0.1, 1/3), a subnormal, infinity and NaN.
    let script = r#"
import sys, torch
from safetensors.torch import save_file
v = [0.1, -1.0 / 3.0, 1e-40, float("inf"), float("nan"), 65504.0]
save_file({
    "h": torch.tensor(v, dtype=torch.float16).reshape(2, 3),
    "w": torch.tensor(v, dtype=torch.bfloat16).reshape(3, 2),
}, sys.argv[1])
"#;
    run_python(script, &path);
    let from_torch = run_python(DESCRIBE_TORCH_BITS, &path);
    let ck = load(&path, &Cpu::new()).unwrap();
    assert_eq!(ck.tensors["h"].dtype(), tessera_core::DType::F16);
    assert_eq!(ck.tensors["w"].dtype(), tessera_core::DType::BF16);
    let here = bits_line("h", &ck.tensors["h"]) + &bits_line("w", &ck.tensors["w"]);
    assert_eq!(here, from_torch);
    // Known values, independent of both sides: bf16(0.1) is 0x3dcd, f16(0.1) is 0x2e66.
    assert_eq!(
        ck.tensors["w"].to_vec::<tessera_core::bf16>().unwrap()[0].to_bits(),
        0x3dcd
    );
    assert_eq!(
        ck.tensors["h"].to_vec::<tessera_core::f16>().unwrap()[0].to_bits(),
        0x2e66
    );
}

#[test]
fn bf16_and_f16_files_written_here_load_in_pytorch_bit_for_bit() {
    if !python_torch_available() {
        return;
    }
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("to_torch.safetensors");
    let values = vec![0.1, -2.5, 3e-5, f64::NEG_INFINITY];
    let base = T::from_vec(values, [2, 2], &dev).unwrap();
    let mut tensors = BTreeMap::new();
    tensors.insert(
        "a.half".to_string(),
        base.to_dtype(tessera_core::DType::F16).unwrap(),
    );
    tensors.insert(
        "b.bf16".to_string(),
        base.to_dtype(tessera_core::DType::BF16).unwrap(),
    );
    save(&path, &tensors, &BTreeMap::new()).unwrap();
    let from_torch = run_python(DESCRIBE_TORCH_BITS, &path);
    let here: String = tensors.iter().map(|(n, t)| bits_line(n, t)).collect();
    assert_eq!(from_torch, here);
}
