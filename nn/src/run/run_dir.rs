//! [`RunDir`]: the folder of a training run and the checkpoints inside it.

use super::manifest::{ChecksummedWriter, Manifest, ShardFile};
use crate::checkpoint::{
    self, remove_stale_temporaries_in, write_atomically, write_atomically_with,
};
use crate::module::Module;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use tessera_core::Backend;

/// The folder of a run (see the [module docs](super) for its layout). Opening it creates the
/// folders and removes temporary files a killed save left behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDir {
    root: PathBuf,
    keep_last: usize,
}

/// The checkpoint subfolder's name.
const CHECKPOINTS: &str = "checkpoints";
/// The pointer to the newest checkpoint, written after it.
const LATEST: &str = "latest";

impl RunDir {
    /// Opens (creating it if needed) the run folder `root`, keeping the 3 newest checkpoints.
    pub fn open(root: impl Into<PathBuf>) -> Result<RunDir> {
        let root = root.into();
        let checkpoints = root.join(CHECKPOINTS);
        fs::create_dir_all(&checkpoints).map_err(|e| Error::io(&checkpoints, e))?;
        remove_stale_temporaries_in(&root);
        remove_stale_temporaries_in(&checkpoints);
        Ok(RunDir { root, keep_last: 3 })
    }

    /// Keeps the `k` newest checkpoints (at least 1) and removes older ones after each save.
    pub fn keep_last(mut self, k: usize) -> RunDir {
        self.keep_last = k.max(1);
        self
    }

    /// How many checkpoints are kept.
    pub fn kept(&self) -> usize {
        self.keep_last
    }

    /// The run folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `DIR/model.safetensors`: the newest model, loadable with [`crate::Module::load`].
    pub fn model_path(&self) -> PathBuf {
        self.root.join("model.safetensors")
    }

    /// `DIR/run.json`: the run's configuration (what a resume must agree with).
    pub fn run_config_path(&self) -> PathBuf {
        self.root.join("run.json")
    }

    /// Writes `model`'s parameters and buffers to [`RunDir::model_path`] (atomically), where
    /// [`crate::Module::load`] and PyTorch's `safetensors` read them.
    pub fn save_model<B: Backend, M: Module<B> + ?Sized>(&self, model: &M) -> Result<()> {
        checkpoint::save(
            self.model_path(),
            &model.state_dict(),
            &std::collections::BTreeMap::new(),
        )
    }

    /// `DIR/checkpoints`.
    pub fn checkpoints_dir(&self) -> PathBuf {
        self.root.join(CHECKPOINTS)
    }

    /// The stem of the checkpoint of `step` (`step-000000000120`).
    pub fn stem(step: u64) -> String {
        format!("step-{step:012}")
    }

    /// The checkpoint file of `step`.
    pub fn checkpoint_path(&self, step: u64) -> PathBuf {
        self.checkpoints_dir()
            .join(format!("{}.safetensors", Self::stem(step)))
    }

    /// The name of rank `rank`'s file of the sharded checkpoint of `step` written by
    /// `world_size` ranks (`step-000000000120.rank-00001-of-00004.safetensors`).
    pub fn shard_file_name(step: u64, rank: usize, world_size: usize) -> String {
        format!(
            "{}.rank-{rank:05}-of-{world_size:05}.safetensors",
            Self::stem(step)
        )
    }

    /// Rank `rank`'s file of the sharded checkpoint of `step` written by `world_size` ranks.
    pub fn shard_path(&self, step: u64, rank: usize, world_size: usize) -> PathBuf {
        self.checkpoints_dir()
            .join(Self::shard_file_name(step, rank, world_size))
    }

    /// The manifest of `step`.
    pub fn manifest_path(&self, step: u64) -> PathBuf {
        self.checkpoints_dir()
            .join(format!("{}.json", Self::stem(step)))
    }

    /// The steps that have a manifest, oldest first (whether their files are whole is checked
    /// on resume).
    pub fn steps(&self) -> Result<Vec<u64>> {
        let dir = self.checkpoints_dir();
        let entries = fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        let mut steps: Vec<u64> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let digits = name.strip_prefix("step-")?.strip_suffix(".json")?;
                (digits.len() == 12 && digits.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| digits.parse().ok())?
            })
            .collect();
        steps.sort_unstable();
        Ok(steps)
    }

    /// Errors when the folder already holds checkpoints: what a fresh run checks before it
    /// writes its own, so that forgetting `--resume` never mixes two runs in one folder.
    pub fn ensure_no_checkpoints(&self) -> Result<()> {
        if self.steps()?.is_empty() {
            return Ok(());
        }
        Err(Error::checkpoint(format!(
            "{} already holds the checkpoints of a run: resume it (`--resume`), or save into \
             another folder",
            self.root.display()
        )))
    }

    /// What `checkpoints/latest` names, if it exists.
    pub fn latest(&self) -> Result<Option<String>> {
        let path = self.checkpoints_dir().join(LATEST);
        match fs::read_to_string(&path) {
            Ok(s) => Ok(Some(s.trim().to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    /// Writes the checkpoint `bytes` of `step`, its manifest, then the `latest` pointer (each
    /// atomically, in that order), and removes checkpoints beyond the newest
    /// [`RunDir::kept`]. Returns the checkpoint's path.
    #[cfg(test)]
    pub(crate) fn commit(&self, step: u64, bytes: &[u8]) -> Result<PathBuf> {
        self.commit_with(step, |out| {
            out.write_all(bytes)
                .map_err(|e| Error::io(self.checkpoint_path(step), e))
        })
    }

    /// [`RunDir::commit`] of the bytes `write` writes (a checkpoint streamed tensor by tensor):
    /// their size and checksum are taken on the way to the file.
    pub(crate) fn commit_with(
        &self,
        step: u64,
        write: impl FnOnce(&mut dyn std::io::Write) -> Result<()>,
    ) -> Result<PathBuf> {
        let path = self.checkpoint_path(step);
        let written = self.write_file(&path, write)?;
        self.commit_manifest(&Manifest::of_one_file(step, written))?;
        Ok(path)
    }

    /// Writes rank `rank`'s file of the sharded checkpoint of `step` (atomically) with the
    /// bytes `write` writes; returns its record for the manifest. Nothing points at it until
    /// rank 0 commits the manifest ([`RunDir::commit_manifest`]).
    pub(crate) fn write_shard(
        &self,
        step: u64,
        rank: usize,
        world_size: usize,
        write: impl FnOnce(&mut dyn std::io::Write) -> Result<()>,
    ) -> Result<ShardFile> {
        self.write_file(&self.shard_path(step, rank, world_size), write)
    }

    fn file_name(path: &Path) -> String {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Writes `path` (a file of the folder) atomically with what `write` writes, counting its
    /// size and checksum for a manifest.
    pub(crate) fn write_file(
        &self,
        path: &Path,
        write: impl FnOnce(&mut dyn std::io::Write) -> Result<()>,
    ) -> Result<ShardFile> {
        let (bytes, crc32) = write_atomically_with(path, |out| {
            let mut counted = ChecksummedWriter::new(out);
            write(&mut counted)?;
            Ok(counted.finish())
        })?;
        Ok(ShardFile::new(Self::file_name(path), bytes, crc32))
    }

    /// Writes (or replaces, e.g. by a consolidated one) the manifest of its step, atomically,
    /// without touching the `latest` pointer or other checkpoints.
    pub(crate) fn write_manifest(&self, manifest: &Manifest) -> Result<()> {
        let text = serde_json::to_vec_pretty(manifest)
            .map_err(|e| Error::checkpoint(format!("cannot write a manifest: {e}")))?;
        write_atomically(&self.manifest_path(manifest.step), &text)
    }

    /// Writes the manifest of a checkpoint whose files are written, then the `latest`
    /// pointer (each atomically), and removes checkpoints beyond the newest
    /// [`RunDir::kept`]: what makes a checkpoint exist.
    pub(crate) fn commit_manifest(&self, manifest: &Manifest) -> Result<()> {
        self.write_manifest(manifest)?;
        write_atomically(
            &self.checkpoints_dir().join(LATEST),
            Self::stem(manifest.step).as_bytes(),
        )?;
        self.prune()
    }

    /// The files of the sharded checkpoint of `step` present in the folder (any world size).
    pub(crate) fn shard_files(&self, step: u64) -> Result<Vec<PathBuf>> {
        Ok(self
            .shard_files_by_step()?
            .remove(&step)
            .unwrap_or_default())
    }

    /// Every sharded-checkpoint file in the folder (whether or not a manifest names it), by
    /// step: one scan of the folder.
    fn shard_files_by_step(&self) -> Result<BTreeMap<u64, Vec<PathBuf>>> {
        let dir = self.checkpoints_dir();
        let entries = fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        let mut out: BTreeMap<u64, Vec<PathBuf>> = BTreeMap::new();
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let step = name
                .strip_prefix("step-")
                .and_then(|n| n.split_once('.'))
                .filter(|(digits, rest)| {
                    digits.len() == 12
                        && rest.starts_with("rank-")
                        && rest.ends_with(".safetensors")
                })
                .and_then(|(digits, _)| digits.parse::<u64>().ok());
            if let Some(step) = step {
                out.entry(step).or_default().push(entry.path());
            }
        }
        Ok(out)
    }

    /// Removes every checkpoint but the newest [`RunDir::kept`]: the manifest first, so that
    /// a kill in between leaves a file no manifest names rather than a manifest without file.
    fn prune(&self) -> Result<()> {
        let steps = self.steps()?;
        let excess = steps.len().saturating_sub(self.keep_last);
        let mut shard_files = self.shard_files_by_step()?;
        for &step in &steps[..excess] {
            let mut paths = vec![self.manifest_path(step), self.checkpoint_path(step)];
            paths.extend(shard_files.remove(&step).unwrap_or_default());
            remove_files(&paths)?;
        }
        // The files of a sharded save that was never committed (a rank failed, or the job
        // was killed before rank 0 wrote the manifest), older than the newest checkpoint.
        let kept = &steps[excess..];
        if let Some(&newest) = kept.last() {
            for (step, files) in shard_files {
                if step < newest && !kept.contains(&step) {
                    remove_files(&files)?;
                }
            }
        }
        Ok(())
    }
}

/// Removes `paths`, those already gone included.
fn remove_files(paths: &[PathBuf]) -> Result<()> {
    for path in paths {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_write_file_manifest_and_pointer_and_keep_the_newest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::open(tmp.path().join("run")).unwrap().keep_last(2);
        for step in [5u64, 10, 15] {
            dir.commit(step, format!("bytes of {step}").as_bytes())
                .unwrap();
        }
        assert_eq!(dir.steps().unwrap(), vec![10, 15]);
        assert_eq!(dir.latest().unwrap().as_deref(), Some("step-000000000015"));
        assert!(!dir.checkpoint_path(5).exists());
        let m = Manifest::read(&dir.manifest_path(15)).unwrap();
        m.verify(b"bytes of 15").unwrap();
        assert!(m.verify(b"bytes of 1").is_err());
        assert!(m.verify(b"bytes of 16").is_err());
    }

    #[test]
    fn pruning_removes_old_sharded_checkpoints_and_files_no_manifest_names() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::open(tmp.path()).unwrap().keep_last(2);
        let write = |step: u64, rank: usize| {
            dir.write_shard(step, rank, 2, |out| {
                out.write_all(format!("rank {rank} of step {step}").as_bytes())
                    .map_err(|e| Error::io(dir.shard_path(step, rank, 2), e))
            })
            .unwrap()
        };
        for step in [1u64, 2, 4] {
            let files = vec![write(step, 0), write(step, 1)];
            if step == 4 {
                // Step 3's save failed on one rank: its file is left, with no manifest.
                write(3, 1);
            }
            dir.commit_manifest(&Manifest::sharded(step, files))
                .unwrap();
        }
        assert_eq!(dir.steps().unwrap(), vec![2, 4]);
        let left = |step| dir.shard_files(step).unwrap().len();
        assert_eq!((left(1), left(2), left(3), left(4)), (0, 2, 0, 2));
        let manifest = Manifest::read(&dir.manifest_path(4)).unwrap();
        assert!(manifest.is_sharded());
        let bytes = std::fs::read(dir.shard_path(4, 1, 2)).unwrap();
        manifest.shards[1].verify(&bytes).unwrap();
        assert!(manifest.shards[0].verify(&bytes).is_err());
    }

    #[test]
    fn opening_removes_a_killed_saves_temporaries() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::open(tmp.path()).unwrap();
        let stale = dir.checkpoints_dir().join(format!(
            ".step-000000000001.safetensors.tmp-{}-0",
            u32::MAX - 1
        ));
        fs::write(&stale, b"half").unwrap();
        RunDir::open(tmp.path()).unwrap();
        assert!(!stale.exists());
    }
}
