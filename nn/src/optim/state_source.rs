//! [`StateSource`]: named tensors an optimizer restores its state from, read one tensor (or
//! one range of one) at a time, so that a rank that keeps a share of the state reads only its
//! share ([`crate::optim::Optimizer::load_state_from`]).

use tessera_core::{Backend, DType, Error, Result, Tensor};

/// Named tensors read on demand: a state in memory (`&[(key, tensor)]`), or
/// the files of a sharded checkpoint.
pub trait StateSource<B: Backend> {
    /// Every key, sorted.
    fn keys(&self) -> Vec<String>;

    /// The dims and dtype of the tensor `key`, if there is one.
    fn spec(&self, key: &str) -> Option<(Vec<usize>, DType)>;

    /// The whole tensor `key`.
    fn read(&self, key: &str) -> Result<Tensor<B>>;

    /// Elements `[offset, offset + len)` of the flattened tensor `key`, as a contiguous rank-1
    /// tensor in a storage of its own. By default the whole tensor is read and cut.
    fn read_range(&self, key: &str, offset: usize, len: usize) -> Result<Tensor<B>> {
        let whole = self.read(key)?;
        let n = whole.numel();
        whole.reshape([n])?.narrow(0, offset, len)?.compact()
    }
}

impl<B: Backend> StateSource<B> for &[(String, Tensor<B>)] {
    fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.iter().map(|(k, _)| k.clone()).collect();
        keys.sort();
        keys
    }

    fn spec(&self, key: &str) -> Option<(Vec<usize>, DType)> {
        self.iter()
            .find(|(k, _)| k == key)
            .map(|(_, t)| (t.dims().to_vec(), t.dtype()))
    }

    fn read(&self, key: &str) -> Result<Tensor<B>> {
        self.iter()
            .find(|(k, _)| k == key)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| Error::Checkpoint {
                msg: format!("the state has no tensor `{key}`"),
            })
    }
}

/// A checkpoint in memory.
impl<B: Backend> StateSource<B> for crate::checkpoint::Checkpoint<B> {
    fn keys(&self) -> Vec<String> {
        self.tensors.keys().cloned().collect()
    }

    fn spec(&self, key: &str) -> Option<(Vec<usize>, DType)> {
        self.tensors
            .get(key)
            .map(|t| (t.dims().to_vec(), t.dtype()))
    }

    fn read(&self, key: &str) -> Result<Tensor<B>> {
        self.tensors
            .get(key)
            .cloned()
            .ok_or_else(|| Error::Checkpoint {
                msg: format!("the checkpoint has no tensor `{key}`"),
            })
    }
}

/// The tensors of `source` whose keys start with `prefix`, under the rest of their keys (one
/// optimizer group's state inside a run checkpoint).
pub struct Prefixed<'a, B: Backend> {
    /// The source.
    pub source: &'a dyn StateSource<B>,
    /// The prefix stripped from its keys.
    pub prefix: String,
}

impl<B: Backend> StateSource<B> for Prefixed<'_, B> {
    fn keys(&self) -> Vec<String> {
        self.source
            .keys()
            .into_iter()
            .filter_map(|k| k.strip_prefix(self.prefix.as_str()).map(str::to_string))
            .collect()
    }

    fn spec(&self, key: &str) -> Option<(Vec<usize>, DType)> {
        self.source.spec(&format!("{}{key}", self.prefix))
    }

    fn read(&self, key: &str) -> Result<Tensor<B>> {
        self.source.read(&format!("{}{key}", self.prefix))
    }

    fn read_range(&self, key: &str, offset: usize, len: usize) -> Result<Tensor<B>> {
        self.source
            .read_range(&format!("{}{key}", self.prefix), offset, len)
    }
}
