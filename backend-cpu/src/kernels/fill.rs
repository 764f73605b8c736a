//! Constant and random fills of fresh storages.

use crate::alloc::{try_zeroed, Zeroable};
use crate::parallel::fill_chunks;
use tessera_core::{Element, Result};

/// `numel` copies of `value` converted like [`Element::from_f64`].
pub(crate) fn full<T: Element + Zeroable>(numel: usize, value: f64) -> Result<Vec<T>> {
    let v = T::from_f64(value);
    // Zero-initialised memory comes straight from the allocator; only other values (including
    // -0.0, whose bits are not zero) need a pass.
    let mut out = try_zeroed::<T>(numel)?;
    if v.to_f64().to_bits() != 0 {
        fill_chunks(&mut out, |_, chunk| chunk.fill(v));
    }
    Ok(out)
}

/// `numel` values where element `i` is `sample(offset + i)` (wrapping), filled in parallel
/// chunks for large draws.
pub(crate) fn counter_based<T, F>(numel: usize, offset: u64, sample: F) -> Result<Vec<T>>
where
    T: Zeroable + Send,
    F: Fn(u64) -> T + Sync,
{
    let mut out = try_zeroed::<T>(numel)?;
    fill_chunks(&mut out, |start, chunk| {
        for (i, d) in chunk.iter_mut().enumerate() {
            *d = sample(offset.wrapping_add((start + i) as u64));
        }
    });
    Ok(out)
}
