//! Pretrained models in the Hugging Face layout (`tessera_nn::pretrained`): one of the tiny
//! fixture folders (GPT-2, GPT-2 sharded, Llama, Llama 3), embedded in the fuzzer, written to
//! the scratch folder and damaged as the step's seed says: `config.json` fields set to odd
//! values (0, huge sizes, strings where numbers go, unknown rope scaling kinds, another
//! `model_type`) or deleted, the file cut or not JSON; the weights' bytes or safetensors header
//! mutated, a tensor removed, renamed, reshaped, converted or duplicated; the shard index naming
//! absent shards, `../` paths, other shards, or no `weight_map`. Then
//! `PretrainedModel::from_pretrained` on the CPU backend must return a model or a typed error;
//! a model must give finite logits `[batch, t, vocab]` that its cached forward repeats.
//!
//! And round trips: a loaded fixture saved with `save_pretrained` (into a fresh folder, over
//! the folder it came from, or over a sharded one) loads back with identical tensors; a random
//! small GPT-2 or Llama configuration (biases, grouped-query attention, head widths, Llama 3
//! rope scaling, tied heads, dtypes) saved and loaded back keeps its configuration and tensors.

use super::kinds::*;
use super::{alloc_work, op, same_values, FuzzBackend, Op, LAYER_WORK};
use crate::machine::{Ctx, Outcome, Skip};
use crate::rng::Rng;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint::{self, NamedTensors};
use tessera_nn::gpt::{Gpt, GptCache, GptConfig};
use tessera_nn::layers::{GeluApproximation, RopeScaling};
use tessera_nn::llama::{Llama, LlamaCache, LlamaConfig};
use tessera_nn::precision::Precision;
use tessera_nn::pretrained::hf_files::{
    ConfigReader, CONFIG_FILE, WEIGHTS_FILE, WEIGHTS_INDEX_FILE,
};
use tessera_nn::pretrained::{gpt2, llama, PretrainedModel, PretrainedOptions};
use tessera_nn::Module;

/// A fixture folder: its files, embedded in the fuzzer.
pub struct Fixture {
    /// The fixture's folder name under `fixtures/hf`.
    pub name: &'static str,
    /// `(file name, bytes)`; `config.json` first.
    pub files: &'static [(&'static str, &'static [u8])],
}

impl Fixture {
    /// The bytes of `file`.
    pub fn file(&self, file: &str) -> Option<&'static [u8]> {
        self.files.iter().find(|(n, _)| *n == file).map(|(_, b)| *b)
    }

    /// The parsed `config.json`.
    pub fn config(&self) -> Map<String, Value> {
        match serde_json::from_slice(self.file(CONFIG_FILE).unwrap_or_default()) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        }
    }

    /// Whether the weights are sharded.
    pub fn sharded(&self) -> bool {
        self.file(WEIGHTS_INDEX_FILE).is_some()
    }

    /// The weight files (the single file, or the shards).
    pub fn weight_files(&self) -> Vec<&'static str> {
        self.files
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| n.ends_with(".safetensors"))
            .collect()
    }
}

macro_rules! fixture_file {
    ($dir:literal, $file:literal) => {
        (
            $file,
            include_bytes!(concat!("../../../fixtures/hf/", $dir, "/", $file)) as &[u8],
        )
    };
}

/// The four model fixtures.
pub static FIXTURES: [Fixture; 4] = [
    Fixture {
        name: "gpt2-tiny",
        files: &[
            fixture_file!("gpt2-tiny", "config.json"),
            fixture_file!("gpt2-tiny", "model.safetensors"),
        ],
    },
    Fixture {
        name: "gpt2-tiny-sharded",
        files: &[
            fixture_file!("gpt2-tiny-sharded", "config.json"),
            fixture_file!("gpt2-tiny-sharded", "model.safetensors.index.json"),
            fixture_file!("gpt2-tiny-sharded", "model-00001-of-00004.safetensors"),
            fixture_file!("gpt2-tiny-sharded", "model-00002-of-00004.safetensors"),
            fixture_file!("gpt2-tiny-sharded", "model-00003-of-00004.safetensors"),
            fixture_file!("gpt2-tiny-sharded", "model-00004-of-00004.safetensors"),
        ],
    },
    Fixture {
        name: "llama-tiny",
        files: &[
            fixture_file!("llama-tiny", "config.json"),
            fixture_file!("llama-tiny", "model.safetensors"),
        ],
    },
    Fixture {
        name: "llama3-tiny",
        files: &[
            fixture_file!("llama3-tiny", "config.json"),
            fixture_file!("llama3-tiny", "model.safetensors"),
        ],
    },
];

/// The fixture the size argument at `i` picks.
fn fixture<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize) -> &'static Fixture {
    &FIXTURES[c.size(i) % FIXTURES.len()]
}

/// The seed of a damaged-folder step: the full 64 bits of its bytes argument (seed arguments
/// are mostly small, so they would repeat the same few damages).
fn damage_seed<B: FuzzBackend>(c: &Ctx<'_, B>) -> u64 {
    c.bytes(1).seed
}

/// Writes `fixture` into a fresh folder `dir`.
pub fn write_fixture(dir: &Path, fixture: &Fixture) -> std::io::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    for (name, bytes) in fixture.files {
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(())
}

/// A JSON value for a configuration field: plausible sizes, zero, huge and negative numbers,
/// fractions, strings, null, booleans, arrays and objects.
pub fn json_value(rng: &mut Rng) -> Value {
    match rng.below(10) {
        0..=3 => json!(rng.pick(&[
            0u64,
            1,
            2,
            3,
            4,
            5,
            7,
            8,
            16,
            31,
            32,
            33,
            64,
            88,
            96,
            127,
            128,
            129,
            256,
            511,
            512,
            513,
            4096,
            1 << 16,
            1 << 31,
            1 << 32,
            1 << 40,
            1 << 62,
            u64::MAX,
        ])),
        4 => json!(rng.pick(&[-1i64, -2, -128, i64::MIN])),
        5 => json!(rng.pick(&[
            0.0f64,
            -0.0,
            0.5,
            1.0,
            1.5,
            2.0,
            1e-5,
            1e-300,
            1e300,
            1e308,
            -1e308,
            f64::MIN_POSITIVE,
            -3.5,
            32.0,
            1e6,
        ])),
        6 => json!(rng.pick(&[
            "", "gpt2", "llama", "silu", "swish", "gelu", "gelu_new", "relu", "32", "NaN",
            "llama3", "default", "\u{0}", "float16",
        ])),
        7 => pick_value(rng, vec![Value::Null, json!(true), json!(false)]),
        8 => pick_value(
            rng,
            vec![json!([]), json!([1, 2]), json!([32]), json!([[]])],
        ),
        _ => pick_value(
            rng,
            vec![
                json!({}),
                json!({"rope_type": "dynamic", "factor": 2.0}),
                json!({"rope_type": "linear", "factor": 4.0}),
                json!({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
                json!({"rope_type": "llama3"}),
                json!({"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
            ],
        ),
    }
}

/// One of `items`, drawn by `rng`.
fn pick_value(rng: &mut Rng, mut items: Vec<Value>) -> Value {
    let i = rng.below(items.len());
    items.swap_remove(i)
}

/// The fields the loaders read (others are kept but ignored).
const CONFIG_KEYS: [&str; 31] = [
    "model_type",
    "vocab_size",
    // GPT-2
    "n_embd",
    "n_head",
    "n_layer",
    "n_positions",
    "n_inner",
    "activation_function",
    "resid_pdrop",
    "embd_pdrop",
    "attn_pdrop",
    "layer_norm_epsilon",
    "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx",
    "add_cross_attention",
    "tie_word_embeddings",
    // Llama
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
    "head_dim",
    "rope_parameters",
    "rope_theta",
    "rope_scaling",
    "rms_norm_eps",
    "attention_bias",
    "mlp_bias",
    "attention_dropout",
    "hidden_act",
];

/// A rope scaling object: a known or unknown kind, with numbers, odd values or missing fields.
fn rope_object(rng: &mut Rng) -> Value {
    let mut m = Map::new();
    let kind = pick_value(
        rng,
        vec![
            json!("llama3"),
            json!("llama3"),
            json!("default"),
            json!("linear"),
            json!("dynamic"),
            json!("yarn"),
            json!("longrope"),
            json!(""),
            json!(5),
            Value::Null,
        ],
    );
    m.insert(
        (if rng.chance(80) { "rope_type" } else { "type" }).into(),
        kind,
    );
    for (key, usual) in [
        ("factor", json!(8.0)),
        ("low_freq_factor", json!(1.0)),
        ("high_freq_factor", json!(4.0)),
        ("original_max_position_embeddings", json!(256)),
        ("rope_theta", json!(500_000.0)),
    ] {
        match rng.below(10) {
            0..=5 => {
                m.insert(key.into(), usual);
            }
            6 => {}
            _ => {
                m.insert(key.into(), json_value(rng));
            }
        }
    }
    Value::Object(m)
}

/// The `config.json` a plan writes: edited fields, or raw bytes that may not be JSON.
#[derive(Clone, Debug)]
pub enum ConfigPlan {
    /// The fixture's own file.
    Original,
    /// A JSON object (fields edited).
    Edited(Map<String, Value>),
    /// Bytes (cut, mutated, not JSON, not an object).
    Raw(Vec<u8>),
}

impl ConfigPlan {
    /// The bytes to write, `None` for the original.
    fn bytes(&self) -> Option<Vec<u8>> {
        match self {
            ConfigPlan::Original => None,
            ConfigPlan::Edited(m) => serde_json::to_vec_pretty(m).ok(),
            ConfigPlan::Raw(b) => Some(b.clone()),
        }
    }

    /// The configuration as the loader will parse it, if it is a JSON object.
    fn map(&self, fixture: &Fixture) -> Option<Map<String, Value>> {
        match self {
            ConfigPlan::Original => Some(fixture.config()),
            ConfigPlan::Edited(m) => Some(m.clone()),
            ConfigPlan::Raw(b) => match serde_json::from_slice(b) {
                Ok(Value::Object(m)) => Some(m),
                _ => None,
            },
        }
    }
}

/// What the damage of a step is: drawn from its seed alone (so the work estimate sees the
/// same configuration the step writes).
#[derive(Clone, Debug)]
pub struct Damage {
    /// `config.json`.
    pub config: ConfigPlan,
    /// What happens to the weights (`0` none; see [`damage_weights`]).
    pub weights: usize,
    /// The seed of the weight damage.
    pub weight_seed: u64,
    /// A description for messages.
    pub what: String,
    /// Whether the folder must load (the damage is one the loader documents as harmless).
    pub must_load: bool,
}

/// Weight damage kinds.
const W_NONE: usize = 0;
const W_BYTES: usize = 1;
const W_HEADER: usize = 2;
const W_TENSOR: usize = 3;
const W_FILES: usize = 4;

/// Draws the damage of a step from `seed` for `fixture`.
pub fn draw_damage(fixture: &Fixture, seed: u64) -> Damage {
    let mut rng = Rng::new(seed);
    let mut d = Damage {
        config: ConfigPlan::Original,
        weights: W_NONE,
        weight_seed: rng.next_u64(),
        what: "none".into(),
        must_load: false,
    };
    let original = fixture.config();
    match rng.below(100) {
        0..=11 => d.must_load = true,
        12..=26 => {
            // Sizes: one or two of the model's size fields zero, small, large or huge.
            let mut m = original.clone();
            let keys: &[&str] = if original.get("model_type") == Some(&json!("gpt2")) {
                &[
                    "n_embd",
                    "n_head",
                    "n_layer",
                    "n_positions",
                    "vocab_size",
                    "n_inner",
                ]
            } else {
                &[
                    "hidden_size",
                    "intermediate_size",
                    "num_hidden_layers",
                    "num_attention_heads",
                    "num_key_value_heads",
                    "max_position_embeddings",
                    "head_dim",
                    "vocab_size",
                ]
            };
            let mut what = Vec::new();
            for _ in 0..rng.range(1, 2) {
                let key = rng.pick(keys);
                let v = rng.pick(&[
                    0u64,
                    1,
                    2,
                    3,
                    6,
                    7,
                    16,
                    64,
                    256,
                    1000,
                    4096,
                    1 << 16,
                    1 << 20,
                    1 << 24,
                    1 << 31,
                    1 << 32,
                    1 << 40,
                    1 << 62,
                    u64::MAX / 4 + 1,
                    u64::MAX,
                ]);
                what.push(format!("{key} = {v}"));
                m.insert(key.into(), json!(v));
            }
            d.what = format!("config: {}", what.join(", "));
            d.config = ConfigPlan::Edited(m);
        }
        27..=41 => {
            // One to three fields set to odd values or deleted.
            let mut m = original.clone();
            let mut what = Vec::new();
            for _ in 0..rng.range(1, 3) {
                let key = if rng.chance(85) {
                    rng.pick(&CONFIG_KEYS).to_string()
                } else {
                    let keys: Vec<&String> = original.keys().collect();
                    keys[rng.below(keys.len())].clone()
                };
                if rng.chance(15) {
                    m.remove(&key);
                    what.push(format!("{key} deleted"));
                } else {
                    let v = match key.as_str() {
                        "rope_parameters" | "rope_scaling" if rng.chance(70) => {
                            rope_object(&mut rng)
                        }
                        _ => json_value(&mut rng),
                    };
                    what.push(format!("{key} = {v}"));
                    m.insert(key, v);
                }
            }
            d.what = format!("config: {}", what.join(", "));
            d.config = ConfigPlan::Edited(m);
        }
        42..=49 => {
            // The file itself: cut, flipped, not JSON, not an object, deeply nested.
            let text = fixture.file(CONFIG_FILE).unwrap_or_default();
            let (bytes, what): (Vec<u8>, &str) = match rng.below(8) {
                0 => (text[..rng.below(text.len())].to_vec(), "config.json cut"),
                1 => {
                    let mut b = text.to_vec();
                    for _ in 0..rng.range(1, 4) {
                        let at = rng.below(b.len());
                        b[at] = rng.next_u64() as u8;
                    }
                    (b, "config.json bytes flipped")
                }
                2 => (Vec::new(), "config.json empty"),
                3 => (
                    rng.pick(&[&b"[]"[..], b"null", b"42", b"\"gpt2\"", b"{"])
                        .to_vec(),
                    "config.json not an object",
                ),
                4 => (
                    "[".repeat(100_000).into_bytes(),
                    "config.json nested 100000 deep",
                ),
                5 => {
                    let mut b = vec![0xEF, 0xBB, 0xBF];
                    b.extend_from_slice(text);
                    (b, "config.json with a byte-order mark")
                }
                6 => (
                    (0..rng.range(1, 64))
                        .map(|_| rng.next_u64() as u8)
                        .collect(),
                    "config.json random bytes",
                ),
                _ => {
                    // A field given twice: serde_json keeps the last.
                    let s = String::from_utf8_lossy(text).replacen(
                        '{',
                        "{\"vocab_size\": 1099511627776,",
                        1,
                    );
                    (s.into_bytes(), "config.json with vocab_size twice")
                }
            };
            d.what = what.into();
            d.config = ConfigPlan::Raw(bytes);
        }
        50..=54 => {
            // Another architecture, or the rope scaling.
            let mut m = original.clone();
            if rng.chance(50) {
                let t = rng.pick(&["gpt2", "llama", "mistral", "GPT2", "", "llama "]);
                m.insert("model_type".into(), json!(t));
                d.what = format!("model_type = {t:?}");
            } else {
                let r = rope_object(&mut rng);
                d.what = format!("rope_parameters = {r}");
                m.insert("rope_parameters".into(), r);
            }
            d.config = ConfigPlan::Edited(m);
        }
        55..=57 => {
            // Harmless: fields the loaders do not read, deleted, added or changed.
            let mut m = original.clone();
            for key in [
                "architectures",
                "transformers_version",
                "use_cache",
                "dtype",
            ] {
                if rng.chance(50) {
                    m.remove(key);
                }
            }
            m.insert("fuzz_unknown_field".into(), json_value(&mut rng));
            m.insert("torch_dtype".into(), json!("bfloat16"));
            d.what = "harmless config edits".into();
            d.config = ConfigPlan::Edited(m);
            d.must_load = true;
        }
        58..=69 => {
            d.weights = W_BYTES;
            d.what = "weight bytes mutated".into();
        }
        70..=76 => {
            d.weights = W_HEADER;
            d.what = "safetensors header edited".into();
        }
        77..=89 => {
            d.weights = W_TENSOR;
            d.what = "a tensor edited".into();
        }
        _ => {
            d.weights = W_FILES;
            d.what = "weight files or index damaged".into();
        }
    }
    d
}

/// The options a flag and seed pick: the defaults, or another dtype and precision.
fn options(custom: bool, seed: u64) -> PretrainedOptions {
    if !custom {
        return PretrainedOptions::default();
    }
    let mut rng = Rng::new(seed ^ 0x0707);
    PretrainedOptions {
        dtype: rng.pick(&[DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64]),
        precision: rng.pick(&Precision::ALL),
    }
}

/// The tensors a model constructor allocates, in order: `first`, then `layer` `layers` times,
/// then `last`.
pub(super) struct Allocations {
    first: Vec<usize>,
    layer: Vec<usize>,
    layers: usize,
    last: Vec<usize>,
}

impl Allocations {
    /// The work of allocating them in order: the first request of 2^32 elements or more fails
    /// at once, so nothing after it is allocated.
    pub(super) fn work(&self) -> usize {
        let fails = |n: usize| alloc_work(n) == 0 && n > 0;
        let sum = |sizes: &[usize]| sizes.iter().fold(0usize, |a, &n| a.saturating_add(n));
        let until_failure = |sizes: &[usize]| sizes.iter().position(|&n| fails(n));
        if let Some(i) = until_failure(&self.first) {
            return sum(&self.first[..i]);
        }
        let mut work = sum(&self.first);
        // The list of layers is reserved (fallibly) before any layer is built: 2^26 layers of
        // a hundred bytes or more are past the child's memory, so nothing more is allocated.
        if self.layers >= 1 << 26 {
            return work;
        }
        if self.layers > 0 {
            if let Some(i) = until_failure(&self.layer) {
                return work.saturating_add(sum(&self.layer[..i]));
            }
            let per_layer = sum(&self.layer).saturating_add(LAYER_WORK);
            work = work.saturating_add(per_layer.saturating_mul(self.layers));
        }
        match until_failure(&self.last) {
            Some(i) => work.saturating_add(sum(&self.last[..i])),
            None => work.saturating_add(sum(&self.last)),
        }
    }

    /// Whether one of the requests fails at once.
    pub(super) fn fails(&self) -> bool {
        if self.layers >= 1 << 26 {
            return true;
        }
        let layer = if self.layers > 0 {
            &self.layer[..]
        } else {
            &[]
        };
        self.first
            .iter()
            .chain(layer)
            .chain(&self.last)
            .any(|&n| alloc_work(n) == 0 && n > 0)
    }
}

/// The tensors `Llama::new` allocates.
pub(super) fn llama_allocations(c: &LlamaConfig) -> Allocations {
    let (e, v, m) = (c.hidden_size, c.vocab_size, c.intermediate_size);
    let (h, kvh, d) = (c.num_attention_heads, c.num_key_value_heads, c.head_dim());
    let q = h.saturating_mul(d).saturating_mul(e);
    let kv = kvh.saturating_mul(d).saturating_mul(e);
    let mlp = m.saturating_mul(e);
    let mut last = Vec::new();
    if !c.tie_word_embeddings {
        last.push(v.saturating_mul(e));
    }
    last.push(e);
    Allocations {
        first: vec![v.saturating_mul(e)],
        layer: vec![q, kv, kv, q, mlp, mlp, mlp, e, e],
        layers: c.num_hidden_layers,
        last,
    }
}

/// The tensors `Gpt::new` allocates.
fn gpt_allocations(c: &GptConfig) -> Allocations {
    let e = c.n_embd;
    let ee = e.saturating_mul(e);
    Allocations {
        first: vec![
            c.vocab_size.saturating_mul(e),
            c.block_size.saturating_mul(e),
        ],
        layer: vec![
            ee.saturating_mul(3),
            ee,
            ee.saturating_mul(4),
            ee.saturating_mul(4),
            e.saturating_mul(10),
        ],
        layers: c.n_layer,
        last: vec![e.saturating_mul(2)],
    }
}

/// The work of loading a folder whose configuration is `map` with `options`: the loaders build
/// the whole model of the configuration before they compare it with the weights.
fn load_work(map: &Map<String, Value>, options: &PretrainedOptions) -> usize {
    let reader = ConfigReader::new(map, Path::new("fuzz"));
    let fixed = 1 << 16;
    match reader.string("model_type") {
        Ok(Some(gpt2::MODEL_TYPE)) => {
            match gpt2::config_from_hf(&reader, options) {
                Ok(c) => {
                    // The model, then the caches of the cached forward (two sequences; they
                    // grow on demand from 256 positions).
                    let cache = c
                        .n_layer
                        .saturating_mul(4)
                        .saturating_mul(c.block_size.min(256))
                        .saturating_mul(c.n_embd);
                    gpt_allocations(&c)
                        .work()
                        .saturating_add(alloc_work(cache))
                        .saturating_add(fixed)
                }
                Err(_) => fixed,
            }
        }
        Ok(Some(llama::MODEL_TYPE)) => match llama::config_from_hf(&reader, options) {
            Ok(c) => {
                // The caches grow on demand from 256 positions.
                let cache = c
                    .max_position_embeddings
                    .min(256)
                    .saturating_mul(c.head_dim())
                    .saturating_mul(c.num_key_value_heads)
                    .saturating_mul(c.num_hidden_layers)
                    .saturating_mul(4);
                llama_allocations(&c)
                    .work()
                    .saturating_add(alloc_work(cache))
                    .saturating_add(fixed)
            }
            Err(_) => fixed,
        },
        _ => fixed,
    }
}

/// A few byte mutations of `bytes`: changed bytes (mostly in the header), a cut, appended
/// garbage, a header length that claims too much or a little too much.
fn mutate_bytes(bytes: &mut Vec<u8>, rng: &mut Rng) {
    for _ in 0..rng.range(1, 3) {
        // The header's extent, as far as the bytes (after earlier edits) have it.
        let header = bytes
            .get(..8)
            .map(|b| {
                (u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize).saturating_add(8)
            })
            .unwrap_or(0)
            .min(bytes.len());
        match rng.below(6) {
            0 | 1 if !bytes.is_empty() => {
                let span = if rng.chance(70) && header > 0 {
                    header
                } else {
                    bytes.len()
                };
                let at = rng.below(span);
                bytes[at] = rng.pick(&[b'"', b'[', b']', b'{', b'}', b',', b'0', b'9', 0, 0xFF]);
            }
            2 => bytes.truncate(rng.below(bytes.len() + 1)),
            3 => bytes.extend((0..rng.range(1, 64)).map(|_| rng.next_u64() as u8)),
            4 if bytes.len() >= 8 => {
                let huge = rng.pick(&[u64::MAX, 1 << 40, 1 << 32, 100_000_000]);
                bytes[..8].copy_from_slice(&huge.to_le_bytes());
            }
            _ if bytes.len() >= 8 => {
                let n = u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]));
                let off = rng.pick(&[1u64, 2, 7, 8, u64::MAX]);
                let n = if rng.chance(50) {
                    n.wrapping_add(off)
                } else {
                    n.wrapping_sub(off)
                };
                bytes[..8].copy_from_slice(&n.to_le_bytes());
            }
            _ => {}
        }
    }
}

/// A safetensors file with one tensor entry of its header edited (dtype, shape or offsets),
/// the data kept.
fn edit_header(bytes: &[u8], rng: &mut Rng) -> Vec<u8> {
    let Some(n) = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize)
    else {
        return bytes.to_vec();
    };
    let Some(Ok(Value::Object(mut header))) = bytes
        .get(8..8usize.saturating_add(n))
        .map(serde_json::from_slice::<Value>)
    else {
        return bytes.to_vec();
    };
    let names: Vec<String> = header
        .keys()
        .filter(|k| *k != "__metadata__")
        .cloned()
        .collect();
    if names.is_empty() {
        return bytes.to_vec();
    }
    let name = names[rng.below(names.len())].clone();
    if let Some(Value::Object(entry)) = header.get_mut(&name) {
        match rng.below(6) {
            0 => {
                let dtype = rng.pick(&[
                    "F16", "BF16", "F64", "I64", "BOOL", "I32", "U8", "F8_E4M3", "C64", "", "f32",
                ]);
                entry.insert("dtype".into(), json!(dtype));
            }
            1 => {
                let shape = pick_value(
                    rng,
                    vec![
                        json!([]),
                        json!([0]),
                        json!([1u64 << 40, 1u64 << 40]),
                        json!([u64::MAX]),
                        json!([32, 32, 32]),
                        json!([-1]),
                        json!("32"),
                    ],
                );
                entry.insert("shape".into(), shape);
            }
            2 => {
                let end = (bytes.len() - 8 - n) as u64;
                let offsets = pick_value(
                    rng,
                    vec![
                        json!([0, 0]),
                        json!([0, end + 1]),
                        json!([end, 0]),
                        json!([u64::MAX - 1, u64::MAX]),
                        json!([4, 4 + 4096]),
                        json!([0]),
                        json!(null),
                    ],
                );
                entry.insert("data_offsets".into(), offsets);
            }
            3 => {
                entry.remove(rng.pick(&["dtype", "shape", "data_offsets"]));
            }
            4 => {
                let v = header.remove(&name).unwrap_or(Value::Null);
                header.insert(format!("{name}.copy"), v);
            }
            _ => {
                header.insert("__metadata__".into(), json_value(rng));
            }
        }
    }
    let text = serde_json::to_vec(&Value::Object(header)).unwrap_or_default();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(bytes.get(8 + n..).unwrap_or_default());
    out
}

/// The names a renamed tensor may get.
const ODD_NAMES: [&str; 9] = [
    "x",
    "transformer.h.7.ln_1.weight",
    "model.layers.99.mlp.up_proj.weight",
    "h.0.ln_1.weight",
    "transformer.h.0.attn.bias",
    "model.layers.0.self_attn.rotary_emb.inv_freq",
    "lm_head.weight",
    "transformer.wte.weight.extra",
    "model.embed_tokens.weight",
];

/// Edits one tensor of the safetensors file at `path` (`index`: the shard index to keep in
/// step when names change). Returns whether the weights stay finite and whether the folder
/// must still load.
fn edit_tensor(
    path: &Path,
    index: Option<&Path>,
    fixture: &Fixture,
    rng: &mut Rng,
) -> Result<(bool, bool, String), tessera_core::Error> {
    let cpu = Cpu::new();
    let mut tensors: NamedTensors<Cpu> = checkpoint::load(path, &cpu)?.tensors;
    let names: Vec<String> = tensors.keys().cloned().collect();
    let name = names[rng.below(names.len())].clone();
    let gpt = fixture.name.starts_with("gpt2");
    let (mut finite, mut must_load) = (true, false);
    let mut renamed: Option<(String, Option<String>)> = None;
    let what;
    match rng.below(8) {
        0 => {
            tensors.remove(&name);
            renamed = Some((name.clone(), None));
            what = format!("{name} removed");
        }
        1 => {
            let to = rng.pick(&ODD_NAMES).to_string();
            if let Some(t) = tensors.remove(&name) {
                tensors.insert(to.clone(), t);
            }
            renamed = Some((name.clone(), Some(to.clone())));
            what = format!("{name} renamed {to}");
        }
        2 => {
            let t = &tensors[&name];
            let n = t.numel();
            let dims: Vec<usize> = match rng.below(5) {
                0 => vec![n],
                1 => vec![1, n],
                2 => t.dims().iter().rev().copied().collect(),
                3 => t.dims().iter().map(|&d| d + 1).collect(),
                _ => vec![0, t.dims().last().copied().unwrap_or(1)],
            };
            let values: Vec<f64> = (0..dims.iter().product::<usize>())
                .map(|i| (i % 7) as f64 * 0.01)
                .collect();
            let new = Tensor::from_f64_values(&values, dims.clone(), DType::F32, &cpu)?;
            tensors.insert(name.clone(), new);
            what = format!("{name} reshaped to {dims:?}");
        }
        3 => {
            let dtype = rng.pick(&[DType::F16, DType::BF16, DType::F64, DType::I64, DType::Bool]);
            let t = tensors[&name].to_dtype(dtype)?;
            must_load = dtype.is_float();
            tensors.insert(name.clone(), t);
            what = format!("{name} converted to {dtype}");
        }
        4 => {
            let t = &tensors[&name];
            let mut values = t.to_vec_f64()?;
            let at = rng.below(values.len().max(1));
            if let Some(v) = values.get_mut(at) {
                *v = rng.pick(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY]);
                finite = false;
            }
            let new = Tensor::from_f64_values(&values, t.dims().to_vec(), t.dtype(), &cpu)?;
            tensors.insert(name.clone(), new);
            what = format!("{name}[{at}] not finite");
        }
        5 => {
            // Buffers and rotary tables the loaders skip, or a tensor they refuse.
            let (extra, harmless) = match (gpt, rng.below(3)) {
                (true, 0) => ("transformer.h.0.attn.masked_bias", true),
                (true, 1) => ("transformer.h.1.attn.bias", true),
                (false, 0) => ("model.layers.0.self_attn.rotary_emb.inv_freq", true),
                (false, 1) => ("model.rotary_emb.inv_freq", true),
                _ => ("extra.weight", false),
            };
            let t = Tensor::from_f64_values(&[1.0, 2.0], vec![2], DType::F32, &cpu)?;
            tensors.insert(extra.to_string(), t);
            renamed = Some((String::new(), Some(extra.to_string())));
            must_load = harmless;
            what = format!("{extra} added");
        }
        _ => {
            // The output head stored beside the embedding: the same values (harmless where
            // the head is tied) or others.
            let embedding = if gpt {
                "transformer.wte.weight"
            } else {
                "model.embed_tokens.weight"
            };
            let Some(e) = tensors.get(embedding).cloned() else {
                return Ok((true, false, format!("{name}: no {embedding} in this file")));
            };
            let same = rng.chance(50);
            let head = if same { e } else { e.mul_scalar(2.0)? };
            let tied = gpt || fixture.name == "llama3-tiny";
            tensors.insert("lm_head.weight".into(), head);
            renamed = Some((String::new(), Some("lm_head.weight".into())));
            must_load = same && tied;
            what = format!(
                "lm_head.weight stored ({})",
                if same { "same" } else { "different" }
            );
        }
    }
    let metadata = BTreeMap::from([("format".to_string(), "pt".to_string())]);
    let bytes = checkpoint::serialize(tensors.iter(), &metadata)?;
    std::fs::write(path, bytes).map_err(|e| tessera_core::Error::io(path, e))?;
    // Keep the index in step with the names of the shard.
    if let (Some(index), Some((from, to))) = (index, renamed) {
        let shard = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default();
        let text = std::fs::read(index).map_err(|e| tessera_core::Error::io(index, e))?;
        if let Ok(mut v) = serde_json::from_slice::<Value>(&text) {
            if let Some(Value::Object(map)) = v.get_mut("weight_map") {
                map.remove(&from);
                if let Some(to) = to {
                    map.insert(to, json!(shard));
                }
            }
            let text = serde_json::to_vec_pretty(&v).unwrap_or_default();
            std::fs::write(index, text).map_err(|e| tessera_core::Error::io(index, e))?;
        }
    }
    Ok((finite, must_load, what))
}

/// Damages the weight files or the index of the folder `dir` holding `fixture`. Returns
/// whether the folder must still load and what was done.
fn damage_files(dir: &Path, fixture: &Fixture, rng: &mut Rng) -> std::io::Result<(bool, String)> {
    let index = dir.join(WEIGHTS_INDEX_FILE);
    let weights = fixture.weight_files();
    let file = weights[rng.below(weights.len())];
    if !fixture.sharded() {
        return Ok(match rng.below(5) {
            0 => {
                std::fs::remove_file(dir.join(WEIGHTS_FILE))?;
                (false, "model.safetensors removed".into())
            }
            1 => {
                std::fs::remove_file(dir.join(WEIGHTS_FILE))?;
                std::fs::create_dir(dir.join(WEIGHTS_FILE))?;
                (false, "model.safetensors is a folder".into())
            }
            2 => {
                // A stale or bogus index beside the single file: the single file wins.
                std::fs::write(&index, b"{\"weight_map\": {\"x\": \"../../etc/passwd\"}}")?;
                (true, "a bogus index beside model.safetensors".into())
            }
            _ => {
                // The single file as the only shard of a valid index.
                let shard = "model-00001-of-00001.safetensors";
                std::fs::rename(dir.join(WEIGHTS_FILE), dir.join(shard))?;
                let names = checkpoint::inspect(dir.join(shard))
                    .map(|i| i.tensors.into_keys().collect::<Vec<_>>())
                    .unwrap_or_default();
                let map: Map<String, Value> =
                    names.into_iter().map(|n| (n, json!(shard))).collect();
                let text = serde_json::to_vec(&json!({"metadata": {}, "weight_map": map}))
                    .unwrap_or_default();
                std::fs::write(&index, text)?;
                (
                    true,
                    "model.safetensors as the single shard of an index".into(),
                )
            }
        });
    }
    let text = std::fs::read(&index)?;
    let mut v: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
    let names: Vec<String> = v
        .get("weight_map")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let name = names
        .get(rng.below(names.len().max(1)))
        .cloned()
        .unwrap_or_default();
    fn set_entry(v: &mut Value, name: &str, to: Value) {
        if let Some(Value::Object(m)) = v.get_mut("weight_map") {
            m.insert(name.to_string(), to);
        }
    }
    let (must_load, what) = match rng.below(12) {
        0 => {
            set_entry(&mut v, &name, json!("model-00009-of-00004.safetensors"));
            (false, format!("{name} in an absent shard"))
        }
        1 => {
            let p = rng.pick(&[
                "../x",
                "../gpt2-tiny-sharded/model-00001-of-00004.safetensors",
                "/etc/hostname",
                "",
                ".",
                "..",
                "a/b.safetensors",
                "./model-00001-of-00004.safetensors",
                "model-00001-of-00004.safetensors/",
            ]);
            set_entry(&mut v, &name, json!(p));
            (false, format!("{name} in shard {p:?}"))
        }
        2 => {
            let to = json_value(rng);
            let what = format!("{name} in shard {to}");
            set_entry(&mut v, &name, to);
            (false, what)
        }
        3 => {
            let other = weights[rng.below(weights.len())];
            set_entry(&mut v, &name, json!(other));
            (false, format!("{name} moved to {other} in the index"))
        }
        4 => {
            let w = pick_value(
                rng,
                vec![
                    Value::Null,
                    json!({}),
                    json!([]),
                    json!("model.safetensors"),
                ],
            );
            let what = format!("weight_map = {w}");
            match (&mut v, w.is_null()) {
                (Value::Object(m), true) => {
                    m.remove("weight_map");
                }
                (Value::Object(m), false) => {
                    m.insert("weight_map".into(), w);
                }
                _ => {}
            }
            (false, what)
        }
        5 => {
            set_entry(&mut v, "transformer.h.9.mlp.c_fc.weight", json!(file));
            (false, format!("an extra tensor listed in {file}"))
        }
        6 => {
            if let Value::Object(m) = &mut v {
                m.insert("metadata".into(), json_value(rng));
            }
            (true, "index metadata changed".into())
        }
        7 => {
            let path = dir.join(file);
            let mut bytes = std::fs::read(&path)?;
            mutate_bytes(&mut bytes, rng);
            std::fs::write(&path, bytes)?;
            return Ok((false, format!("{file} bytes mutated")));
        }
        8 => {
            std::fs::remove_file(dir.join(file))?;
            return Ok((false, format!("{file} removed")));
        }
        9 => {
            std::fs::remove_file(dir.join(file))?;
            std::fs::create_dir(dir.join(file))?;
            return Ok((false, format!("{file} is a folder")));
        }
        10 => {
            // The index cut, or not JSON.
            let cut = text[..rng.below(text.len())].to_vec();
            std::fs::write(&index, cut)?;
            return Ok((false, "index cut".into()));
        }
        _ => {
            // A single file beside the index wins.
            std::fs::write(
                dir.join(WEIGHTS_FILE),
                FIXTURES[0].file(WEIGHTS_FILE).unwrap_or_default(),
            )?;
            return Ok((true, "model.safetensors beside the shards".into()));
        }
    };
    std::fs::write(&index, serde_json::to_vec_pretty(&v).unwrap_or_default())?;
    Ok((must_load, what))
}

/// The relative difference of two value lists, or `None` when their lengths differ.
fn max_diff(a: &[f64], b: &[f64]) -> Option<f64> {
    (a.len() == b.len()).then(|| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs() / x.abs().max(1.0))
            .fold(0.0, f64::max)
    })
}

/// Checks a loaded model: logits `[batch, t, vocab]` of valid ids, finite when the weights
/// are, and (in f32 and f64) the cached forward repeating them.
fn check_loaded(
    model: &PretrainedModel<Cpu>,
    options: &PretrainedOptions,
    finite: bool,
    rng: &mut Rng,
) -> Result<(), String> {
    let cpu = Cpu::new();
    let vocab = model.vocab_size();
    let (b, t) = (rng.range(1, 2), rng.range(1, 4).min(model.max_positions()));
    let ids: Vec<i64> = (0..b * t).map(|_| rng.below(vocab.max(1)) as i64).collect();
    let idx = Tensor::from_vec(ids.clone(), [b, t], &cpu).map_err(|e| e.to_string())?;
    let logits = model
        .forward(&idx)
        .map_err(|e| format!("forward of valid ids failed: {e}"))?
        .value();
    if logits.dims() != [b, t, vocab] {
        return Err(format!(
            "logits of shape {} for ids [{b}, {t}] and vocab {vocab}",
            logits.shape()
        ));
    }
    let full = logits.to_vec_f64().map_err(|e| e.to_string())?;
    if finite && full.iter().any(|x| !x.is_finite()) {
        return Err("logits of finite weights are not finite".into());
    }
    let mut cache = model
        .new_cache(b)
        .map_err(|e| format!("new_cache failed: {e}"))?;
    let cached = model
        .forward_cached(&idx, &mut cache)
        .map_err(|e| format!("forward_cached of valid ids failed: {e}"))?;
    if cache.len() != t {
        return Err(format!(
            "the cache holds {} positions after {t}",
            cache.len()
        ));
    }
    let cached = cached.to_vec_f64().map_err(|e| e.to_string())?;
    let exact =
        matches!(options.dtype, DType::F32 | DType::F64) && options.precision == Precision::F32;
    if finite && exact {
        match max_diff(&full, &cached) {
            Some(d) if d <= 1e-4 => {}
            d => return Err(format!("forward_cached differs from forward by {d:?}")),
        }
    }
    // Rewound to a prefix (or not, past the end), the cache decodes the rest again.
    let keep = rng.below(t + 2);
    cache.truncate(keep);
    let kept = keep.min(t);
    if cache.len() != kept {
        return Err(format!(
            "truncate({keep}) of {t} positions left {}",
            cache.len()
        ));
    }
    if kept < t {
        let rest: Vec<i64> = (0..b)
            .flat_map(|r| ids[r * t + kept..(r + 1) * t].to_vec())
            .collect();
        let rest = Tensor::from_vec(rest, [b, t - kept], &cpu).map_err(|e| e.to_string())?;
        let again = model
            .forward_cached(&rest, &mut cache)
            .and_then(|l| l.to_vec_f64())
            .map_err(|e| format!("forward_cached after truncate({keep}): {e}"))?;
        let want: Vec<f64> = (0..b)
            .flat_map(|r| full[(r * t + kept) * vocab..(r + 1) * t * vocab].to_vec())
            .collect();
        if finite && exact {
            match max_diff(&want, &again) {
                Some(d) if d <= 1e-4 => {}
                d => return Err(format!("decoding after truncate({keep}) differs by {d:?}")),
            }
        }
    }
    Ok(())
}

/// Builds a damaged folder and loads it.
/// A fixture written to the scratch folder and damaged as a step's seed says.
struct DamagedFolder {
    fixture: &'static Fixture,
    dir: std::path::PathBuf,
    opts: PretrainedOptions,
    /// Whether the weights are still finite.
    finite: bool,
    /// Whether the damage is harmless: the folder must load (with the default options).
    must_load: bool,
    what: String,
    rng: Rng,
}

/// Writes and damages the fixture of step `c` in a folder of its own.
fn damaged_folder<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<DamagedFolder, String> {
    let fixture = fixture(c, 0);
    let damage = draw_damage(fixture, damage_seed(c));
    let opts = options(c.flag(2), damage_seed(c));
    let mut rng = Rng::new(damage.weight_seed);
    let dir = c.dir().join(format!("hf-{}", rng.next_u64() % 1_000_000));
    let setup = (|| -> Result<(bool, bool, String), String> {
        write_fixture(&dir, fixture).map_err(|e| e.to_string())?;
        if let Some(bytes) = damage.config.bytes() {
            std::fs::write(dir.join(CONFIG_FILE), bytes).map_err(|e| e.to_string())?;
        }
        let weights = fixture.weight_files();
        let file = dir.join(weights[rng.below(weights.len())]);
        let index = fixture.sharded().then(|| dir.join(WEIGHTS_INDEX_FILE));
        Ok(match damage.weights {
            W_BYTES => {
                let mut bytes = std::fs::read(&file).map_err(|e| e.to_string())?;
                mutate_bytes(&mut bytes, &mut rng);
                std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
                // Changed data bytes are any values, NaN included.
                (false, false, damage.what.clone())
            }
            W_HEADER => {
                let bytes = std::fs::read(&file).map_err(|e| e.to_string())?;
                std::fs::write(&file, edit_header(&bytes, &mut rng)).map_err(|e| e.to_string())?;
                // Data read as another dtype is any values.
                (false, false, damage.what.clone())
            }
            W_TENSOR => {
                let (finite, must, what) = edit_tensor(&file, index.as_deref(), fixture, &mut rng)
                    .map_err(|e| format!("editing the fixture failed: {e}"))?;
                (finite, must, what)
            }
            W_FILES => {
                let (must, what) =
                    damage_files(&dir, fixture, &mut rng).map_err(|e| e.to_string())?;
                (true, must, what)
            }
            _ => (true, damage.must_load, damage.what.clone()),
        })
    })();
    let (finite, must_load, what) = match setup {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("setting up {}: {e}", fixture.name));
        }
    };
    let must_load = must_load && opts == PretrainedOptions::default();
    Ok(DamagedFolder {
        fixture,
        dir,
        opts,
        finite,
        must_load,
        what,
        rng,
    })
}

fn damaged_load<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let mut d = match damaged_folder(c) {
        Ok(d) => d,
        Err(e) => return Outcome::Break(e),
    };
    let (fixture, what, opts) = (d.fixture, &d.what, &d.opts);
    let loaded = PretrainedModel::from_pretrained(&d.dir, &Cpu::new(), opts);
    let _ = std::fs::remove_dir_all(&d.dir);
    match loaded {
        Err(e) if d.must_load => Outcome::Break(format!(
            "{} with harmless damage ({what}) did not load: {e}",
            fixture.name
        )),
        Err(e) => Outcome::Err(e.to_string()),
        Ok(model) => match check_loaded(&model, opts, d.finite, &mut d.rng) {
            Ok(()) => Outcome::Ok(Vec::new()),
            Err(e) => Outcome::Break(format!(
                "{} ({what}), loaded with {opts:?}: {e}",
                fixture.name
            )),
        },
    }
}

/// A damaged folder loaded deferred (`from_pretrained_deferred`, then `load_block` in a
/// drawn order, one block twice) against `from_pretrained`: the same model or both an error
/// (the deferred load's at opening or at a block); before its last block the deferred model
/// refuses to run. A model loaded both ways is then written by `save_pretrained_gathered`
/// (one rank, drawn file size), which must load back as it.
fn deferred_load<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    use tessera_nn::distributed::LocalCommunicator;
    let mut d = match damaged_folder(c) {
        Ok(d) => d,
        Err(e) => return Outcome::Break(e),
    };
    let cpu = Cpu::new();
    let whole = PretrainedModel::from_pretrained(&d.dir, &cpu, &d.opts);
    let r = (|| -> Result<Outcome<B>, String> {
        let deferred = match PretrainedModel::from_pretrained_deferred(&d.dir, &cpu, &d.opts) {
            Ok(m) => m,
            Err(e) if whole.is_ok() => {
                return Err(format!(
                    "from_pretrained loads, the deferred load fails: {e}"
                ))
            }
            Err(e) => return Ok(Outcome::Err(e.to_string())),
        };
        if !deferred.is_deferred() {
            return Err("a deferred load says it is not deferred".into());
        }
        let blocks = deferred.block_prefixes().len();
        let mut order: Vec<usize> = (0..blocks).collect();
        for i in (1..blocks).rev() {
            order.swap(i, d.rng.below(i + 1));
        }
        if blocks > 0 {
            order.push(d.rng.below(blocks));
        }
        let ids = Tensor::from_vec(vec![0i64], [1, 1], &cpu).map_err(|e| e.to_string())?;
        for (i, &block) in order.iter().enumerate() {
            if i < blocks && deferred.forward(&ids).is_ok() {
                return Err(format!("ran with {i} of {blocks} blocks read"));
            }
            if let Err(e) = deferred.load_block(block) {
                return match &whole {
                    Ok(_) => Err(format!("block {block} fails, the whole load does not: {e}")),
                    Err(_) => Ok(Outcome::Err(e.to_string())),
                };
            }
        }
        if deferred.load_block(blocks).is_ok() {
            return Err(format!("load_block({blocks}) of {blocks} blocks succeeded"));
        }
        let whole = match &whole {
            Ok(m) => m,
            Err(e) => {
                return Err(format!(
                    "the deferred load read every block, the whole failed: {e}"
                ))
            }
        };
        let (a, b) = (snapshot(whole)?, snapshot(&deferred)?);
        if let Some(diff) = snapshot_diff(&a, &b) {
            return Err(format!("the deferred load differs: {diff}"));
        }
        let out = d.dir.with_extension("gathered");
        let max = [1u64, 20_000, 1 << 40][d.rng.below(3)];
        let comm = LocalCommunicator::new();
        let saved = deferred.save_pretrained_gathered(&out, max, None, &comm);
        let back =
            saved.and_then(|()| PretrainedModel::from_pretrained(&out, &cpu, &Default::default()));
        let _ = std::fs::remove_dir_all(&out);
        let back = back.map_err(|e| format!("save_pretrained_gathered, from_pretrained: {e}"))?;
        let exact = d.opts.dtype == DType::F32;
        if exact {
            if let Some(diff) = snapshot_diff(&b, &snapshot(&back)?) {
                return Err(format!("saved gathered and loaded back: {diff}"));
            }
        }
        Ok(Outcome::Ok(Vec::new()))
    })();
    let _ = std::fs::remove_dir_all(&d.dir);
    r.unwrap_or_else(|e| Outcome::Break(format!("{} ({}): {e}", d.fixture.name, d.what)))
}

/// Every tensor of a model as `(name, dims, dtype, bits)`.
type Snapshot = Vec<(String, Vec<usize>, DType, Vec<u64>)>;

fn snapshot<M: Module<Cpu>>(m: &M) -> Result<Snapshot, String> {
    m.state_dict()
        .into_iter()
        .map(|(n, t)| {
            let v = t.to_vec_f64().map_err(|e| e.to_string())?;
            Ok((
                n,
                t.dims().to_vec(),
                t.dtype(),
                v.iter().map(|x| x.to_bits()).collect(),
            ))
        })
        .collect()
}

/// The first difference of two snapshots.
fn snapshot_diff(a: &Snapshot, b: &Snapshot) -> Option<String> {
    if a.len() != b.len() {
        let names = |s: &Snapshot| s.iter().map(|t| t.0.clone()).collect::<Vec<_>>();
        return Some(format!("tensors {:?} became {:?}", names(a), names(b)));
    }
    a.iter().zip(b).find_map(|(x, y)| {
        let same_values = x.3.len() == y.3.len()
            && same_values(
                &x.3.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>(),
                &y.3.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>(),
            );
        (x.0 != y.0 || x.1 != y.1 || x.2 != y.2 || !same_values).then(|| {
            format!(
                "{} {:?} {} became {} {:?} {}{}",
                x.0,
                x.1,
                x.2,
                y.0,
                y.1,
                y.2,
                if same_values {
                    ""
                } else {
                    " with other values"
                }
            )
        })
    })
}

/// Loads a fixture, saves it, loads it back: identical tensors and configuration fields.
fn save_round_trip<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let fixture = fixture(c, 0);
    let opts = options(c.flag(2), c.seed(1));
    let mut rng = Rng::new(c.seed(1));
    let base = c.dir().join(format!("rt-{}", rng.next_u64() % 1_000_000));
    let (src, out) = (base.join("src"), base.join("out"));
    let r = (|| -> Result<Outcome<B>, String> {
        write_fixture(&src, fixture).map_err(|e| e.to_string())?;
        let model = match PretrainedModel::from_pretrained(&src, &Cpu::new(), &opts) {
            Ok(m) => m,
            Err(e) if opts == PretrainedOptions::default() => {
                return Ok(Outcome::Break(format!(
                    "{} did not load: {e}",
                    fixture.name
                )))
            }
            Err(e) => return Ok(Outcome::Err(e.to_string())),
        };
        // Into a fresh folder, over the folder it came from, or over a sharded folder (whose
        // stale index must go).
        let target = match rng.below(3) {
            0 => out.clone(),
            1 => src.clone(),
            _ => {
                write_fixture(&out, &FIXTURES[1]).map_err(|e| e.to_string())?;
                out.clone()
            }
        };
        // One file, or shards of a random size (0 is refused), over whatever layout is there.
        let limit = match rng.below(3) {
            0 => None,
            _ => Some(rng.below(120_000) as u64),
        };
        let saved = match limit {
            None => model.save_pretrained(&target),
            Some(bytes) => model.save_pretrained_sharded(&target, bytes),
        };
        match (saved, limit) {
            (Err(tessera_core::Error::InvalidArgument { .. }), Some(0)) => {
                return Ok(Outcome::Err("a shard limit of 0 refused".into()))
            }
            (Ok(()), Some(0)) => {
                return Ok(Outcome::Break("a shard limit of 0 was accepted".into()))
            }
            (Err(e), _) => return Ok(Outcome::Err(e.to_string())),
            (Ok(()), _) => {}
        }
        let back = match PretrainedModel::from_pretrained(&target, &Cpu::new(), &opts) {
            Ok(m) => m,
            Err(e) => {
                return Ok(Outcome::Break(format!(
                    "{} saved but not loadable: {e}",
                    fixture.name
                )))
            }
        };
        if back.model_type() != model.model_type()
            || back.vocab_size() != model.vocab_size()
            || back.max_positions() != model.max_positions()
        {
            return Ok(Outcome::Break(format!(
                "{}: the round trip changed the model's kind or shape",
                fixture.name
            )));
        }
        for key in ["bos_token_id", "eos_token_id"] {
            if back.token_id(key) != model.token_id(key) {
                return Ok(Outcome::Break(format!(
                    "{}: {key} changed in the round trip",
                    fixture.name
                )));
            }
        }
        if let Some(d) = snapshot_diff(&snapshot(&model)?, &snapshot(&back)?) {
            return Ok(Outcome::Break(format!(
                "{} round trip with {opts:?}: {d}",
                fixture.name
            )));
        }
        // Saving what was loaded back writes the same configuration.
        let again = base.join("again");
        back.save_pretrained(&again).map_err(|e| e.to_string())?;
        let read = |p: &Path| -> Result<Value, String> {
            let text = std::fs::read(p.join(CONFIG_FILE)).map_err(|e| e.to_string())?;
            serde_json::from_slice(&text).map_err(|e| e.to_string())
        };
        if read(&target)? != read(&again)? {
            return Ok(Outcome::Break(format!(
                "{}: saving a loaded save wrote another config.json",
                fixture.name
            )));
        }
        Ok(Outcome::Ok(Vec::new()))
    })();
    let _ = std::fs::remove_dir_all(&base);
    r.unwrap_or_else(Outcome::Err)
}

/// A small random GPT or Llama configuration from the sizes at 0..4 and the seed at 5.
/// A random configuration of either architecture.
enum RandomConfig {
    Gpt(GptConfig),
    Llama(LlamaConfig),
}

fn random_config<B: FuzzBackend>(c: &Ctx<'_, B>) -> RandomConfig {
    let mut rng = Rng::new(c.seed(5));
    let s = |i: usize| c.size(i) % 4 + 1;
    let dtype = rng.pick(&[DType::F32, DType::F32, DType::F64, DType::F16, DType::BF16]);
    if c.flag(4) {
        let heads = s(1);
        let config = GptConfig::new(s(0), heads, heads * 2 * s(2), s(3) * 4, s(3) * 8 + 3)
            .dropout(rng.pick(&[0.0, 0.1, 0.5]))
            .gelu(rng.pick(&[GeluApproximation::Tanh, GeluApproximation::None]))
            .layer_norm_eps(rng.pick(&[1e-5, 1e-6, 0.5]))
            .dtype(dtype)
            .bias(rng.chance(90));
        RandomConfig::Gpt(config)
    } else {
        let kv = s(1);
        let heads = kv * rng.range(1, 3);
        let head_dim = 2 * s(2);
        let hidden = if rng.chance(25) {
            heads * head_dim + 2 * rng.range(1, 3)
        } else {
            heads * head_dim
        };
        let mut max_positions = s(3) * 4;
        let scaling = if rng.chance(40) {
            let low = rng.pick(&[0.5, 1.0, 2.0]);
            match rng.below(3) {
                0 => RopeScaling::Llama3 {
                    factor: rng.pick(&[1.0, 2.0, 8.0, 32.0]),
                    low_freq_factor: low,
                    high_freq_factor: low * rng.pick(&[1.5, 4.0]),
                    original_max_position_embeddings: rng.pick(&[4, 64, 8192]),
                },
                1 => RopeScaling::Linear {
                    factor: rng.pick(&[0.25, 2.0, 8.0]),
                },
                _ => {
                    // A dynamic model covers `factor` times the original context (what the
                    // file records as `max_position_embeddings`).
                    let factor = rng.pick(&[1.0, 2.0, 4.0]);
                    let original = s(3) * 2;
                    max_positions = original * factor as usize;
                    RopeScaling::Dynamic {
                        factor,
                        original_max_position_embeddings: original,
                    }
                }
            }
        } else {
            RopeScaling::None
        };
        let config = LlamaConfig::new(
            s(3) * 8 + 5,
            hidden,
            s(0) * 6,
            s(0),
            heads,
            kv,
            max_positions,
        )
        .rope_theta(rng.pick(&[10_000.0, 500_000.0, 1.5]))
        .rope_scaling(scaling)
        .rms_norm_eps(rng.pick(&[1e-6, 1e-5, 0.25]))
        .tie_word_embeddings(rng.chance(50))
        .head_dim_override((hidden != heads * head_dim || rng.chance(20)).then_some(head_dim))
        .attention_bias(rng.chance(30))
        .mlp_bias(rng.chance(30))
        .dtype(dtype);
        RandomConfig::Llama(config)
    }
}

/// A random small GPT-2 or Llama saved with `save_pretrained(dir, None)` and loaded back.
fn random_model_round_trip<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<Outcome<B>, Skip> {
    let config = random_config(c);
    let cpu = Cpu::new();
    let mut g = Generator::new(c.seed(5));
    let dir = c.dir().join(format!(
        "random-{}",
        Rng::new(c.seed(5)).next_u64() % 1_000_000
    ));
    let r = (|| -> Result<Outcome<B>, String> {
        match config {
            RandomConfig::Gpt(config) => {
                let model = match config.init(&cpu, &mut g) {
                    Ok(m) => m,
                    Err(e) => return Ok(Outcome::Err(e.to_string())),
                };
                if let Err(e) = model.save_pretrained(&dir, None) {
                    return Ok(Outcome::Err(e.to_string()));
                }
                let opts = PretrainedOptions {
                    dtype: config.dtype,
                    precision: Precision::F32,
                };
                let back = match Gpt::from_pretrained(&dir, &cpu, &opts) {
                    Ok(m) => m,
                    Err(e) => {
                        return Ok(Outcome::Break(format!(
                            "{config:?} saved but not loadable: {e}"
                        )))
                    }
                };
                if back.config() != &config {
                    return Ok(Outcome::Break(format!(
                        "{config:?} came back as {:?}",
                        back.config()
                    )));
                }
                if let Some(d) = snapshot_diff(&snapshot(&model)?, &snapshot(&back)?) {
                    return Ok(Outcome::Break(format!("{config:?}: {d}")));
                }
                // The loaded model decodes like the saved one.
                let ids: Vec<i64> = (0..3).map(|i| (i * 5 % config.vocab_size) as i64).collect();
                let idx = Tensor::from_vec(ids, [1, 3.min(config.block_size)], &cpu);
                if let Ok(idx) = idx.and_then(|i| i.narrow(1, 0, 3.min(config.block_size))) {
                    let mut cache =
                        GptCache::new(back.config(), 1, &cpu).map_err(|e| e.to_string())?;
                    back.forward_cached(&idx, &mut cache)
                        .map_err(|e| format!("forward_cached of the loaded model: {e}"))?;
                }
                Ok(Outcome::Ok(Vec::new()))
            }
            RandomConfig::Llama(config) => {
                let model = match config.init(&cpu, &mut g) {
                    Ok(m) => m,
                    Err(e) => return Ok(Outcome::Err(e.to_string())),
                };
                if let Err(e) = model.save_pretrained(&dir, None) {
                    return Ok(Outcome::Err(e.to_string()));
                }
                let opts = PretrainedOptions {
                    dtype: config.dtype,
                    precision: Precision::F32,
                };
                let back = match Llama::from_pretrained(&dir, &cpu, &opts) {
                    Ok(m) => m,
                    Err(e) => {
                        return Ok(Outcome::Break(format!(
                            "{config:?} saved but not loadable: {e}"
                        )))
                    }
                };
                let b = back.config();
                // A head width equal to hidden / heads is written but read back as no override.
                let same = b.head_dim() == config.head_dim()
                    && LlamaConfig {
                        head_dim_override: None,
                        ..*b
                    } == LlamaConfig {
                        head_dim_override: None,
                        ..config
                    };
                if !same {
                    return Ok(Outcome::Break(format!("{config:?} came back as {b:?}")));
                }
                if let Some(d) = snapshot_diff(&snapshot(&model)?, &snapshot(&back)?) {
                    return Ok(Outcome::Break(format!("{config:?}: {d}")));
                }
                let t = 3.min(config.max_position_embeddings);
                let ids: Vec<i64> = (0..t).map(|i| (i * 5 % config.vocab_size) as i64).collect();
                let idx = Tensor::from_vec(ids, [1, t], &cpu).map_err(|e| e.to_string())?;
                let mut cache = LlamaCache::new(b, 1, &cpu).map_err(|e| e.to_string())?;
                back.forward_cached(&idx, &mut cache)
                    .map_err(|e| format!("forward_cached of the loaded model: {e}"))?;
                Ok(Outcome::Ok(Vec::new()))
            }
        }
    })();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(r.unwrap_or_else(Outcome::Break))
}

/// The folder, its damage and options of a "damaged folder" step, for its work estimate.
fn damaged_work<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<usize, Skip> {
    let fixture = fixture(c, 0);
    let damage = draw_damage(fixture, damage_seed(c));
    let opts = options(c.flag(2), damage_seed(c));
    match damage.config.map(fixture) {
        Some(map) => Ok(load_work(&map, &opts)),
        None => Ok(1 << 16),
    }
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op(
            "PretrainedModel::from_pretrained (damaged folder), forward, forward_cached",
            6,
            &[SIZE, BYTES, B],
            NONE,
            |c| Ok(damaged_load(c)),
        )
        .work(damaged_work),
        op(
            "PretrainedModel::from_pretrained_deferred (damaged folder), load_block, \
             save_pretrained_gathered",
            3,
            &[SIZE, BYTES, B],
            NONE,
            |c| Ok(deferred_load(c)),
        )
        .work(damaged_work),
        op(
            "PretrainedModel: from_pretrained, save_pretrained(_sharded), from_pretrained",
            2,
            &[SIZE, SEED, B],
            NONE,
            |c| Ok(save_round_trip(c)),
        )
        .work(|_| Ok(1 << 18)),
        op(
            "Gpt/Llama (random config): save_pretrained, from_pretrained",
            2,
            &[SIZE, SIZE, SIZE, SIZE, B, SEED],
            NONE,
            |c| random_model_round_trip(c),
        )
        .work(|_| Ok(1 << 16)),
        op(
            "hf_files::read_config, load_weights, WeightsFolder (damaged folder)",
            2,
            &[SIZE, BYTES, B],
            NONE,
            |c| {
                use tessera_nn::pretrained::hf_files::{load_weights, read_config, WeightsFolder};
                let fixture = fixture(c, 0);
                let damage = draw_damage(fixture, damage_seed(c));
                let dir = c.dir().join("hf-files");
                let mut rng = Rng::new(damage.weight_seed);
                let setup = (|| -> std::io::Result<()> {
                    write_fixture(&dir, fixture)?;
                    if let Some(bytes) = damage.config.bytes() {
                        std::fs::write(dir.join(CONFIG_FILE), bytes)?;
                    }
                    if damage.weights != W_NONE {
                        damage_files(&dir, fixture, &mut rng)?;
                    }
                    Ok(())
                })();
                if let Err(e) = setup {
                    return Ok(Outcome::Break(format!("setting up: {e}")));
                }
                let config = read_config(&dir);
                let weights = load_weights(&dir, &Cpu::new());
                // The same tensors read one at a time, in a drawn order.
                let one_at_a_time = WeightsFolder::open(&dir).and_then(|folder| {
                    let mut names: Vec<String> = folder.specs().map(|s| s.name.clone()).collect();
                    for i in (1..names.len()).rev() {
                        names.swap(i, rng.below(i + 1));
                    }
                    let mut out = NamedTensors::new();
                    for name in names {
                        let t = folder.read(&name, &Cpu::new())?;
                        let spec = folder.spec(&name).expect("listed");
                        if t.dims() != spec.dims.as_slice() || t.dtype() != spec.dtype {
                            return Ok(Err(format!(
                                "`{name}` read as {} {:?}, listed as {} {:?}",
                                t.dtype(),
                                t.dims(),
                                spec.dtype,
                                spec.dims
                            )));
                        }
                        out.insert(name, t);
                    }
                    Ok(Ok(out))
                });
                let _ = std::fs::remove_dir_all(&dir);
                Ok(match (config, weights, one_at_a_time) {
                    (_, _, Ok(Err(e))) => Outcome::Break(e),
                    (_, Ok(_), Err(e)) | (_, Err(e), Ok(_)) => Outcome::Break(format!(
                        "load_weights and WeightsFolder disagree on whether the folder reads: {e}"
                    )),
                    (Err(e), _, _) | (_, Err(e), _) => Outcome::Err(e.to_string()),
                    (Ok(_), Ok(w), _) if w.is_empty() => {
                        Outcome::Break("load_weights returned no tensor".into())
                    }
                    (Ok(_), Ok(w), Ok(Ok(each))) => {
                        let bits = |t: &NamedTensors<Cpu>| -> Vec<(String, Vec<u64>)> {
                            t.iter()
                                .map(|(n, t)| {
                                    let v = t.to_vec_f64().unwrap_or_default();
                                    (n.clone(), v.iter().map(|x| x.to_bits()).collect())
                                })
                                .collect()
                        };
                        if bits(&w) == bits(&each) {
                            Outcome::Ok(Vec::new())
                        } else {
                            Outcome::Break(
                                "tensors read one at a time differ from load_weights'".into(),
                            )
                        }
                    }
                })
            },
        ),
    ]
}
