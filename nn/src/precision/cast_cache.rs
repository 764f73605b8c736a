//! [`CastCache`]: within its scope, inference under a 16-bit [`Precision`] casts each f32
//! parameter to the compute dtype once instead of on every call (PyTorch's autocast keeps such
//! a cache for the same reason). `generate --precision bf16 --dtype f32` decodes with it: f32
//! weights, an f32 residual stream and 16-bit products, without re-rounding every weight
//! matrix for every token.
//!
//! A cached cast is used only
//! * without gradients ([`tessera_autograd::no_grad`], as generation runs): a recorded graph
//!   needs the differentiable cast;
//! * for parameters (leaves that require gradients), whose value changes only by assignment
//!   (activations and other constants are cast on every call, as before);
//! * while the parameter still holds the value it was cast from (the same storage: an
//!   optimizer step or a load in between makes a fresh cast, never a stale one).
//!
//! The cache holds the cast tensors (and keeps the values they were cast from alive) until the
//! last guard of the thread is dropped.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use tessera_autograd::{is_grad_enabled, Var};
use tessera_core::{Backend, DType, Result, Tensor};

/// One cached cast: the value it was made from (kept alive, so that its storage cannot be
/// reused by another tensor while the entry exists) and the result.
struct Entry<B: Backend> {
    source: Tensor<B>,
    cast: Tensor<B>,
}

/// The casts of this thread's open scopes, by parameter id and target dtype, and how many
/// guards are open.
#[derive(Default)]
struct Scopes {
    open: usize,
    casts: HashMap<(u64, DType), Box<dyn Any>>,
}

thread_local! {
    static SCOPES: RefCell<Scopes> = RefCell::new(Scopes::default());
}

/// While a `CastCache` is alive on a thread, that thread's gradient-free 16-bit casts of
/// parameters are made once and reused (see the module docs of `precision/cast_cache.rs`). Guards nest; the cache
/// is emptied when the last one is dropped.
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_autograd::{no_grad, Var};
/// use tessera_core::{DType, Generator, Tensor};
/// use tessera_nn::layers::LinearConfig;
/// use tessera_nn::precision::{CastCache, Precision};
/// use tessera_nn::Forward;
/// let (dev, mut g) = (tessera_cpu::Cpu::new(), Generator::new(0));
/// let layer = LinearConfig::new(4, 3).precision(Precision::BF16).init(&dev, &mut g)?;
/// let x = Var::constant(Tensor::ones([2, 4], DType::F32, &dev)?);
/// let plain = no_grad(|| layer.forward(&x))?.value().to_vec::<f32>()?;
/// let _cache = CastCache::enable();
/// let cached = no_grad(|| layer.forward(&x))?.value().to_vec::<f32>()?; // weight cast once
/// assert_eq!(plain, cached);
/// # Ok(()) }
/// ```
#[must_use = "the cache lasts as long as the guard"]
pub struct CastCache {
    /// Tied to the thread whose cache it opened.
    _thread: PhantomData<*const ()>,
}

impl CastCache {
    /// Opens (or joins) this thread's cache.
    pub fn enable() -> CastCache {
        SCOPES.with(|s| s.borrow_mut().open += 1);
        CastCache {
            _thread: PhantomData,
        }
    }

    /// Whether a cache is open on this thread.
    pub fn is_enabled() -> bool {
        SCOPES.with(|s| s.borrow().open > 0)
    }

    /// How many casts this thread's cache holds.
    pub fn len() -> usize {
        SCOPES.with(|s| s.borrow().casts.len())
    }
}

impl Drop for CastCache {
    fn drop(&mut self) {
        SCOPES.with(|s| {
            let mut s = s.borrow_mut();
            s.open -= 1;
            if s.open == 0 {
                s.casts.clear();
            }
        });
    }
}

/// `v` cast to `dtype` from the open cache, cast and remembered on a miss; `None` when the
/// cache does not apply (no open scope, gradients on, or `v` not a parameter).
pub(super) fn cached_cast<B: Backend>(v: &Var<B>, dtype: DType) -> Result<Option<Var<B>>> {
    if !CastCache::is_enabled() || is_grad_enabled() || !v.is_leaf() || !v.requires_grad() {
        return Ok(None);
    }
    let value = v.value();
    let key = (v.id(), dtype);
    let hit = SCOPES.with(|s| {
        let s = s.borrow();
        let entry = s.casts.get(&key)?.downcast_ref::<Entry<B>>()?;
        let same = Arc::ptr_eq(entry.source.storage_arc(), value.storage_arc())
            && entry.source.layout() == value.layout();
        same.then(|| entry.cast.clone())
    });
    let cast = match hit {
        Some(cast) => cast,
        None => {
            let cast = value.to_dtype(dtype)?;
            let entry = Entry {
                source: value,
                cast: cast.clone(),
            };
            SCOPES.with(|s| s.borrow_mut().casts.insert(key, Box::new(entry)));
            cast
        }
    };
    Ok(Some(Var::constant(cast)))
}
