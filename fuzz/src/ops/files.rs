//! Checkpoints (safetensors) and IDX files: saving, loading, round trips, atomic writes, and
//! reading mutated or random bytes.

use super::kinds::*;
use super::{op, same_values, FuzzBackend, Op};
use crate::args::{BytesBase, BytesRecipe};
use crate::machine::{Ctx, Outcome};
use crate::rng::Rng;
use std::collections::BTreeMap;
use std::io::Write;
use tessera_core::{DType, Tensor};
use tessera_nn::checkpoint::{self, LoadMode, TensorSpec};
use tessera_nn::data::idx::{encode_idx, parse_idx, read_idx, read_idx_with_rank};

/// The bytes a recipe describes: a small valid file, then `mutations` random edits (byte
/// changes, truncations, appended garbage, a header length set to something absurd).
pub fn make_bytes(r: BytesRecipe) -> Vec<u8> {
    let mut rng = Rng::new(r.seed);
    let mut bytes = match r.base {
        BytesBase::Idx { gzip } => {
            let dims = [rng.range(0, 3), rng.range(1, 4)];
            let data: Vec<u8> = (0..dims[0] * dims[1]).map(|i| i as u8).collect();
            let raw = encode_idx(&dims, &data).expect("valid dims");
            if gzip {
                let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                z.write_all(&raw).expect("in memory");
                z.finish().expect("in memory")
            } else {
                raw
            }
        }
        BytesBase::Safetensors => {
            let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &tessera_cpu::Cpu::new())
                .expect("valid tensor");
            checkpoint::serialize([("w", &t)], &BTreeMap::new()).expect("serialisable")
        }
        BytesBase::Random => (0..rng.range(0, 64))
            .map(|_| rng.next_u64() as u8)
            .collect(),
    };
    for _ in 0..r.mutations {
        match rng.below(5) {
            0 if !bytes.is_empty() => {
                let at = rng.below(bytes.len());
                bytes[at] = rng.next_u64() as u8;
            }
            1 => bytes.truncate(rng.below(bytes.len() + 1)),
            2 => bytes.extend((0..rng.range(1, 16)).map(|_| rng.next_u64() as u8)),
            3 if bytes.len() >= 8 => {
                // A safetensors header length or IDX dims that claim too much.
                let huge = rng.pick(&[u64::MAX, 1 << 40, 1 << 32, 100_000]);
                bytes[..8].copy_from_slice(&huge.to_le_bytes());
            }
            _ if bytes.len() >= 8 => {
                // IDX: a rank byte and a dimension that claim too much.
                bytes[3] = rng.pick(&[1, 4, 255]);
                bytes[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
            }
            _ => {}
        }
    }
    bytes
}

/// The registers' tensors, named `t<register>`.
fn named<B: FuzzBackend>(c: &Ctx<'_, B>) -> Vec<(String, Tensor<B>)> {
    c.all_tensors()
        .into_iter()
        .filter(|(_, t)| t.numel() <= 1 << 16)
        .map(|(i, t)| (format!("t{i}"), t))
        .collect()
}

/// Errors unless no temporary of an atomic write is left in the scratch folder.
fn no_temporaries<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<(), String> {
    let entries = std::fs::read_dir(c.dir()).map_err(|e| e.to_string())?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.contains(".tmp") {
            return Err(format!("an atomic write left {name} behind"));
        }
    }
    Ok(())
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op("std::fs::write", 4, &[FILE, BYTES], NONE, |c| {
            Ok(std::fs::write(c.file(0), make_bytes(c.bytes(1))).into())
        }),
        op("checkpoint::save", 3, &[FILE], NONE, |c| {
            let tensors = named(c);
            let refs: Vec<(&str, &Tensor<B>)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
            let r = checkpoint::save(c.file(0), refs, &BTreeMap::new());
            if r.is_ok() {
                if let Err(e) = no_temporaries(c) {
                    return Ok(Outcome::Break(e));
                }
            }
            Ok(r.into())
        })
        .work(|c| Ok(named(c).iter().map(|(_, t)| t.numel()).sum())),
        op("checkpoint save and load round trip", 2, &[FILE], NONE, |c| {
            let tensors = named(c);
            let refs: Vec<(&str, &Tensor<B>)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
            if let Err(e) = checkpoint::save(c.file(0), refs, &BTreeMap::new()) {
                return Ok(Outcome::Err(e.to_string()));
            }
            let loaded = match checkpoint::load(c.file(0), c.backend()) {
                Ok(l) => l,
                Err(e) => return Ok(Outcome::Break(format!("saved but not loadable: {e}"))),
            };
            for (name, t) in &tensors {
                let Some(back) = loaded.get(name) else {
                    return Ok(Outcome::Break(format!("{name} missing after the round trip")));
                };
                let same = back.dims() == t.dims()
                    && back.dtype() == t.dtype()
                    && matches!((t.to_vec_f64(), back.to_vec_f64()), (Ok(a), Ok(b)) if same_values(&a, &b));
                if !same {
                    return Ok(Outcome::Break(format!("{name} changed in the round trip")));
                }
            }
            Ok(Outcome::Ok(Vec::new()))
        })
        .work(|c| Ok(named(c).iter().map(|(_, t)| t.numel()).sum::<usize>() * 4)),
        op("checkpoint::load", 4, &[FILE], NONE, |c| {
            Ok(match checkpoint::load(c.file(0), c.backend()) {
                Ok(ck) => {
                    let bad = ck.tensors.iter().find_map(|(name, t)| {
                        crate::invariants::check_tensor(t)
                            .err()
                            .map(|e| format!("loaded {name}: {e}"))
                    });
                    match bad {
                        Some(e) => Outcome::Break(e),
                        None if ck.tensors.keys().any(|n| n.is_empty()) => {
                            Outcome::Break("loaded a tensor with an empty name".into())
                        }
                        None => Outcome::Ok(Vec::new()),
                    }
                }
                Err(e) => Outcome::Err(e.to_string()),
            })
        }),
        op("checkpoint::load_checked", 2, &[FILE, SMALL, DT, B], NONE, |c| {
            let specs = vec![TensorSpec::new("t0", c.dims(1), c.dtype(2))];
            let mode = if c.flag(3) {
                LoadMode::Strict
            } else {
                LoadMode::NonStrict
            };
            Ok(checkpoint::load_checked(c.file(0), c.backend(), &specs, mode)
                .map(|_| ())
                .into())
        }),
        op("checkpoint::inspect", 2, &[FILE], NONE, |c| {
            Ok(checkpoint::inspect(c.file(0)).map(|_| ()).into())
        }),
        op("checkpoint::write_atomically", 2, &[FILE, BYTES], NONE, |c| {
            let bytes = make_bytes(c.bytes(1));
            let r = checkpoint::write_atomically(&c.file(0), &bytes);
            if r.is_ok() {
                match std::fs::read(c.file(0)) {
                    Ok(back) if back == bytes => {}
                    _ => return Ok(Outcome::Break("the file does not hold what was written".into())),
                }
                if let Err(e) = no_temporaries(c) {
                    return Ok(Outcome::Break(e));
                }
            }
            Ok(r.into())
        }),
        op("parse_idx", 3, &[BYTES], NONE, |c| {
            let bytes = make_bytes(c.bytes(0));
            Ok(match parse_idx(&bytes, std::path::Path::new("fuzz.idx")) {
                Ok(a) if a.dims.iter().product::<usize>() != a.data.len() => {
                    Outcome::Break(format!("dims {:?} but {} bytes", a.dims, a.data.len()))
                }
                Ok(_) => Outcome::Ok(Vec::new()),
                Err(e) => Outcome::Err(e.to_string()),
            })
        }),
        op("read_idx", 3, &[FILE], NONE, |c| {
            Ok(match read_idx(&c.file(0)) {
                Ok(a) if a.dims.iter().product::<usize>() != a.data.len() => {
                    Outcome::Break(format!("dims {:?} but {} bytes", a.dims, a.data.len()))
                }
                Ok(_) => Outcome::Ok(Vec::new()),
                Err(e) => Outcome::Err(e.to_string()),
            })
        }),
        op("read_idx_with_rank", 1, &[FILE, SIZE], NONE, |c| {
            Ok(read_idx_with_rank(&c.file(0), c.size(1)).map(|_| ()).into())
        }),
        op("Tensor from IDX bytes", 1, &[BYTES], OUT_T, |c| {
            let bytes = make_bytes(c.bytes(0));
            let array = match parse_idx(&bytes, std::path::Path::new("fuzz.idx")) {
                Ok(a) => a,
                Err(e) => return Ok(Outcome::Err(e.to_string())),
            };
            let values: Vec<f64> = array.data.iter().map(|&b| f64::from(b)).collect();
            Ok(Tensor::from_f64_values(&values, array.dims, DType::F32, c.backend()).into())
        }),
    ]
}
