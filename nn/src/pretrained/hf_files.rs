//! The files of a Hugging Face model folder: `config.json`, and the weights in one
//! `model.safetensors` or in shards listed by `model.safetensors.index.json`.

use super::folder_source::Stored;
use crate::checkpoint::{self, CheckpointReader, NamedTensors, TensorSpec};
use crate::Module;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use tessera_core::{Backend, Error, Result, Tensor};

/// The configuration file of a model folder.
pub const CONFIG_FILE: &str = "config.json";
/// The weights of an unsharded model.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The index of a sharded model: which shard holds which tensor.
pub const WEIGHTS_INDEX_FILE: &str = "model.safetensors.index.json";

/// Reads and parses `dir/config.json` (a JSON object).
pub fn read_config(dir: &Path) -> Result<Map<String, Value>> {
    let path = dir.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Error::format(
            &path,
            "the configuration is not a JSON object",
        )),
        Err(e) => Err(Error::format(&path, format!("not valid JSON: {e}"))),
    }
}

/// Reads `dir/config.json` as [`read_config`] does and checks that its `model_type` is
/// `model_type`.
pub(crate) fn read_config_of(dir: &Path, model_type: &str) -> Result<Map<String, Value>> {
    let map = read_config(dir)?;
    match ConfigReader::new(&map, dir).string("model_type")? {
        Some(found) if found == model_type => Ok(map),
        other => Err(ConfigReader::new(&map, dir)
            .error(format!("`model_type` is {other:?}, not \"{model_type}\""))),
    }
}

/// Reads the JSON index of a sharded model: tensor name -> shard file name.
fn read_index(path: &Path) -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| Error::format(path, format!("not valid JSON: {e}")))?;
    let map = value
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| Error::format(path, "no `weight_map` object"))?;
    let mut out = BTreeMap::new();
    for (name, file) in map {
        let file = file.as_str().ok_or_else(|| {
            Error::format(path, format!("the shard of `{name}` is not a file name"))
        })?;
        // A shard is a file beside the index, nothing else.
        let plain = Path::new(file).file_name().and_then(|f| f.to_str()) == Some(file);
        if !plain || file == ".." || file == "." {
            return Err(Error::format(
                path,
                format!("the shard `{file}` of `{name}` is not a file name in the folder"),
            ));
        }
        out.insert(name.clone(), file.to_string());
    }
    if out.is_empty() {
        return Err(Error::format(path, "the `weight_map` lists no tensor"));
    }
    Ok(out)
}

/// Every tensor of the model folder `dir` on `backend`, in the dtypes stored: from
/// `model.safetensors`, or from the shards `model.safetensors.index.json` lists (each shard
/// must hold exactly the tensors the index gives it). [`WeightsFolder`] reads them one at a
/// time instead.
pub fn load_weights<B: Backend>(dir: &Path, backend: &B) -> Result<NamedTensors<B>> {
    WeightsFolder::open(dir)?.read_all(backend)
}

/// The weights of a model folder opened for reading one tensor at a time: every weights
/// file's header is read and checked when it opens (the index against the shards' own
/// tensors, as [`load_weights`] checks them), each tensor's bytes only when
/// [`WeightsFolder::read`] asks for them. What loads a model a block at a time.
pub struct WeightsFolder {
    files: Vec<CheckpointReader>,
    /// Each tensor's file, an index into `files`.
    file_of: BTreeMap<String, usize>,
}

impl WeightsFolder {
    /// Opens the weights of the model folder `dir`: `model.safetensors`, or the shards
    /// `model.safetensors.index.json` lists (each must exist and hold exactly the tensors the
    /// index gives it).
    pub fn open(dir: &Path) -> Result<WeightsFolder> {
        let single = dir.join(WEIGHTS_FILE);
        let index = dir.join(WEIGHTS_INDEX_FILE);
        if single.is_file() {
            let file = CheckpointReader::open(&single)?;
            let file_of = file.info().tensors.keys().map(|n| (n.clone(), 0)).collect();
            return Ok(WeightsFolder {
                files: vec![file],
                file_of,
            });
        }
        if !index.is_file() {
            return Err(Error::MissingData {
                path: dir.to_path_buf(),
                hint: format!(
                    "no {WEIGHTS_FILE} or {WEIGHTS_INDEX_FILE} there (only safetensors weights \
                     load; convert a pytorch_model.bin with `safetensors` first)"
                ),
            });
        }
        let weight_map = read_index(&index)?;
        let mut by_file: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (name, file) in &weight_map {
            by_file.entry(file).or_default().insert(name);
        }
        // Every shard is checked to exist before any is opened (a clear error first).
        for file in by_file.keys() {
            let path = dir.join(file);
            if !path.is_file() {
                return Err(Error::MissingData {
                    path,
                    hint: format!(
                        "{WEIGHTS_INDEX_FILE} lists this shard but it is not in the folder"
                    ),
                });
            }
        }
        let mut files = Vec::new();
        let mut file_of = BTreeMap::new();
        for (file, names) in by_file {
            let path: PathBuf = dir.join(file);
            let shard = CheckpointReader::open(&path)?;
            let stored = &shard.info().tensors;
            if let Some(name) = stored.keys().find(|n| !names.contains(n.as_str())) {
                return Err(Error::checkpoint(format!(
                    "{}: tensor `{name}` is not listed for this shard in {WEIGHTS_INDEX_FILE}",
                    path.display()
                )));
            }
            if let Some(name) = names.iter().find(|n| !stored.contains_key(**n)) {
                return Err(Error::checkpoint(format!(
                    "{}: tensor `{name}`, which {WEIGHTS_INDEX_FILE} places there, is missing",
                    path.display()
                )));
            }
            file_of.extend(names.iter().map(|n| (n.to_string(), files.len())));
            files.push(shard);
        }
        Ok(WeightsFolder { files, file_of })
    }

    /// The stored tensors' names, dims and dtypes, by name.
    pub fn specs(&self) -> impl Iterator<Item = &TensorSpec> {
        self.file_of
            .iter()
            .map(|(name, &file)| &self.files[file].info().tensors[name])
    }

    /// The stored dims and dtype of tensor `name`, if the folder has it.
    pub fn spec(&self, name: &str) -> Option<&TensorSpec> {
        let file = *self.file_of.get(name)?;
        self.files[file].info().tensors.get(name)
    }

    /// Reads tensor `name` onto `backend`, in its stored dtype.
    pub fn read<B: Backend>(&self, name: &str, backend: &B) -> Result<Tensor<B>> {
        match self.file_of.get(name) {
            Some(&file) => self.files[file].read(name, backend),
            None => Err(Error::checkpoint(format!(
                "tensor `{name}` is not in the model folder's weights"
            ))),
        }
    }

    /// Reads every tensor onto `backend` (what [`load_weights`] returns).
    pub fn read_all<B: Backend>(&self, backend: &B) -> Result<NamedTensors<B>> {
        let mut out = NamedTensors::new();
        for name in self.file_of.keys() {
            out.insert(name.clone(), self.read(name, backend)?);
        }
        Ok(out)
    }
}

/// `model`'s state dict as a folder stores it: each tensor `stored_as` places (a tied weight's
/// second name is placed nowhere) under its stored name, transposed where it says so.
pub(crate) fn stored_tensors<B: Backend, M: Module<B> + ?Sized>(
    model: &M,
    stored_as: impl Fn(&str) -> Option<Stored>,
) -> Result<NamedTensors<B>> {
    let mut out = NamedTensors::new();
    for (name, tensor) in model.state_dict() {
        if let Some(stored) = stored_as(&name) {
            let tensor = stored.layout(tensor)?;
            out.insert(stored.name, tensor);
        }
    }
    Ok(out)
}

/// The largest weights file [`write_folder`] writes by default before it shards: 5 GB, the
/// `max_shard_size` `transformers`' `save_pretrained` has long defaulted to.
pub const DEFAULT_MAX_SHARD_BYTES: u64 = 5_000_000_000;

/// Writes `config` as `dir/config.json` and `tensors` (with the `format: pt` metadata
/// `transformers` looks for), creating `dir`: as `dir/model.safetensors` when they hold at
/// most `max_shard_bytes` bytes, else as shards `model-0000i-of-0000n.safetensors` of at most
/// that size each (a tensor larger than it gets a shard of its own) with the
/// `model.safetensors.index.json` naming each tensor's shard. Weights of an earlier save in the
/// other layout are removed afterwards, so the folder is read as the new one.
pub fn write_folder<B: Backend>(
    dir: &Path,
    config: &Map<String, Value>,
    tensors: &NamedTensors<B>,
    max_shard_bytes: u64,
) -> Result<()> {
    let bytes = |t: &tessera_core::Tensor<B>| (t.numel() as u64) * t.dtype().size_in_bytes() as u64;
    let sizes: Vec<(String, u64)> = tensors.iter().map(|(n, t)| (n.clone(), bytes(t))).collect();
    let shards = plan_shards(&sizes, max_shard_bytes)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let metadata = weights_metadata();
    write_planned_folder(dir, config, &sizes, &shards, &mut |shard, path| {
        let part = shards[shard].iter().map(|&name| (name, &tensors[name]));
        checkpoint::save(path, part, &metadata)
    })
}

/// The metadata of every weights file (`format: pt`, which `transformers` looks for).
pub(crate) fn weights_metadata() -> BTreeMap<String, String> {
    BTreeMap::from([("format".to_string(), "pt".to_string())])
}

/// The weights files [`write_folder`] writes for tensors of `sizes` (stored name, bytes, in
/// name order): the names in each file, in order (one file when all fit `max_shard_bytes`).
pub(crate) fn plan_shards(sizes: &[(String, u64)], max_shard_bytes: u64) -> Result<Vec<Vec<&str>>> {
    if max_shard_bytes == 0 {
        return Err(Error::InvalidArgument {
            op: "save_pretrained",
            msg: "the largest shard must be at least one byte".into(),
        });
    }
    Ok(shard_plan(
        sizes.iter().map(|(n, b)| (n.as_str(), *b)),
        max_shard_bytes,
    ))
}

/// Writes the folder `dir` (which must exist) of the tensors `sizes` planned into `shards`
/// ([`plan_shards`]): each weights file through `write_file(shard, path)` (atomically), the
/// index when there are several, `config` as `config.json`; then removes the weights of an
/// earlier save in the other layout, so the folder is read as the new one.
pub(crate) fn write_planned_folder(
    dir: &Path,
    config: &Map<String, Value>,
    sizes: &[(String, u64)],
    shards: &[Vec<&str>],
    write_file: &mut dyn FnMut(usize, &Path) -> Result<()>,
) -> Result<()> {
    let total: u64 = sizes.iter().map(|(_, b)| b).sum();
    let old_shards = listed_shards(dir);
    // The shard files this save writes (none when it writes one file).
    let mut written = BTreeSet::new();
    if shards.len() <= 1 {
        write_file(0, &dir.join(WEIGHTS_FILE))?;
        remove_if_present(&dir.join(WEIGHTS_INDEX_FILE))?;
    } else {
        let n = shards.len();
        let mut weight_map = Map::new();
        for (i, names) in shards.iter().enumerate() {
            let file = format!("model-{:05}-of-{n:05}.safetensors", i + 1);
            write_file(i, &dir.join(&file))?;
            for &name in names {
                weight_map.insert(name.to_string(), Value::String(file.clone()));
            }
            written.insert(file);
        }
        let index = serde_json::json!({
            "metadata": {"total_size": total},
            "weight_map": weight_map,
        });
        let text = serde_json::to_string_pretty(&index)
            .map_err(|e| Error::format(dir.join(WEIGHTS_INDEX_FILE), e.to_string()))?;
        checkpoint::write_atomically(
            &dir.join(WEIGHTS_INDEX_FILE),
            format!("{text}\n").as_bytes(),
        )?;
        remove_if_present(&dir.join(WEIGHTS_FILE))?;
    }
    // Shards of an earlier save that this one did not overwrite.
    for old in old_shards.difference(&written) {
        // Only weight shards: never what this save just wrote.
        if old.as_str() == WEIGHTS_FILE || !old.ends_with(".safetensors") {
            continue;
        }
        remove_if_present(&dir.join(old))?;
    }
    let text = serde_json::to_string_pretty(&Value::Object(config.clone()))
        .map_err(|e| Error::format(dir.join(CONFIG_FILE), e.to_string()))?;
    checkpoint::write_atomically(&dir.join(CONFIG_FILE), format!("{text}\n").as_bytes())
}

/// Consecutive groups of `tensors` (name, bytes) of at most `max_bytes` each, a larger tensor
/// alone in its group.
fn shard_plan<'a>(
    tensors: impl Iterator<Item = (&'a str, u64)>,
    max_bytes: u64,
) -> Vec<Vec<&'a str>> {
    let mut shards: Vec<Vec<&str>> = Vec::new();
    let mut size = 0u64;
    for (name, bytes) in tensors {
        match shards.last_mut() {
            Some(shard) if size.saturating_add(bytes) <= max_bytes => {
                shard.push(name);
                size += bytes;
            }
            _ => {
                shards.push(vec![name]);
                size = bytes;
            }
        }
    }
    shards
}

/// The shard files the index in `dir` lists (none without a readable index).
fn listed_shards(dir: &Path) -> BTreeSet<String> {
    let index = dir.join(WEIGHTS_INDEX_FILE);
    match index.is_file().then(|| read_index(&index)) {
        Some(Ok(map)) => map.into_values().collect(),
        _ => BTreeSet::new(),
    }
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(path, e)),
        _ => Ok(()),
    }
}

/// Reads typed fields of a `config.json`, each error naming the field and the file.
pub struct ConfigReader<'a> {
    map: &'a Map<String, Value>,
    path: PathBuf,
}

impl<'a> ConfigReader<'a> {
    /// A reader of `map`, read from `dir/config.json`.
    pub fn new(map: &'a Map<String, Value>, dir: &Path) -> Self {
        ConfigReader {
            map,
            path: dir.join(CONFIG_FILE),
        }
    }

    /// A format error about this file.
    pub fn error(&self, msg: impl Into<String>) -> Error {
        Error::format(&self.path, msg)
    }

    /// The field `key`, `None` when absent or null.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A required non-negative integer.
    pub fn size(&self, key: &str) -> Result<usize> {
        self.optional_size(key)?
            .ok_or_else(|| self.error(format!("`{key}` is missing")))
    }

    /// An optional non-negative integer.
    pub fn optional_size(&self, key: &str) -> Result<Option<usize>> {
        self.get(key)
            .map(|v| {
                v.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        self.error(format!("`{key}` must be a non-negative integer, got {v}"))
                    })
            })
            .transpose()
    }

    /// A number, `default` when absent.
    pub fn number_or(&self, key: &str, default: f64) -> Result<f64> {
        self.get(key)
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| self.error(format!("`{key}` must be a number, got {v}")))
            })
            .unwrap_or(Ok(default))
    }

    /// A boolean, `default` when absent.
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        self.get(key)
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| self.error(format!("`{key}` must be true or false, got {v}")))
            })
            .unwrap_or(Ok(default))
    }

    /// A string, `None` when absent.
    pub fn string(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key)
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| self.error(format!("`{key}` must be a string, got {v}")))
            })
            .transpose()
    }

    /// Errors unless `key` is absent or equal to `supported`: a setting that changes the math
    /// which Tessera does not implement.
    pub fn require(&self, key: &str, supported: &Value) -> Result<()> {
        match self.get(key) {
            Some(v) if v != supported => {
                Err(self.error(format!("`{key}` = {v} is not supported (only {supported})")))
            }
            _ => Ok(()),
        }
    }
}
