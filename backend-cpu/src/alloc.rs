//! Fallible allocation of every buffer whose size depends on a tensor's size.
//!
//! Rust's `vec![x; n]` and `Vec::with_capacity` abort the process when the allocator refuses;
//! a tensor library must instead tell its caller ([`Error::OutOfMemory`], naming the bytes). Every
//! output, copy and scratch buffer of this backend comes from one of these functions; only
//! bookkeeping proportional to the rank (dims, strides, multi-indices) uses plain `Vec`s.

use std::mem::MaybeUninit;
use tessera_core::{Error, Result};

/// Element types whose all-zero bit pattern is a valid value, so that zeroed memory is an
/// initialised vector of zeros (`0`, `+0.0`, `false`).
///
/// # Safety
/// Implementors must be plain data without padding, niches or drop glue for which every
/// all-zero byte pattern is a valid value.
pub(crate) unsafe trait Zeroable: Copy {}

// SAFETY: integers and IEEE floats are valid for every bit pattern, zeros included.
unsafe impl Zeroable for f32 {}
// SAFETY: as above.
unsafe impl Zeroable for f64 {}
// SAFETY: as above.
unsafe impl Zeroable for i64 {}
// SAFETY: as above.
unsafe impl Zeroable for u8 {}
// SAFETY: `half`'s 16-bit floats are `repr(transparent)` wrappers of a `u16`, valid for every
// bit pattern (all-zero bits are +0.0).
unsafe impl Zeroable for tessera_core::f16 {}
// SAFETY: as above.
unsafe impl Zeroable for tessera_core::bf16 {}

/// [`Error::OutOfMemory`] on the CPU for `len` elements of `T`.
pub(crate) fn out_of_memory<T>(len: usize) -> Error {
    Error::OutOfMemory {
        device: "cpu:0".into(),
        requested_bytes: len.saturating_mul(std::mem::size_of::<T>()),
    }
}

/// The product of `factors` (an element count), or [`Error::SizeOverflow`] naming `op` when it
/// overflows: what a direct `Backend` call with absurd (but individually valid) operands gets.
pub(crate) fn checked_len(op: &'static str, factors: &[usize]) -> Result<usize> {
    factors
        .iter()
        .try_fold(1usize, |acc, &f| acc.checked_mul(f))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| Error::SizeOverflow {
            op,
            msg: format!("an output of {factors:?} elements overflows"),
        })
}

/// `len` zeros, straight from the allocator's zeroed memory (like `vec![0; len]`, which fresh
/// pages make free), or [`Error::OutOfMemory`].
pub(crate) fn try_zeroed<T: Zeroable>(len: usize) -> Result<Vec<T>> {
    if len == 0 || std::mem::size_of::<T>() == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| out_of_memory::<T>(len))?;
    // SAFETY: `layout` has a non-zero size (`len > 0` and `T` is not zero-sized).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(out_of_memory::<T>(len));
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `[T; len]`, which is
    // exactly what a `Vec<T>` of capacity `len` owns (same size and alignment); its `len`
    // elements are initialised because all-zero bytes are a valid `T` (`Zeroable`).
    Ok(unsafe { Vec::from_raw_parts(ptr.cast::<T>(), len, len) })
}

/// `len` copies of `value`, or [`Error::OutOfMemory`].
pub(crate) fn try_filled<T: Clone>(len: usize, value: T) -> Result<Vec<T>> {
    let mut v = try_with_capacity(len)?;
    v.resize(len, value);
    Ok(v)
}

/// An empty vector with room for exactly `len` elements, or [`Error::OutOfMemory`].
pub(crate) fn try_with_capacity<T>(len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| out_of_memory::<T>(len))?;
    Ok(v)
}

/// Resizes `v` to `len` elements (new ones are `value`), or [`Error::OutOfMemory`].
pub(crate) fn try_resize<T: Clone>(v: &mut Vec<T>, len: usize, value: T) -> Result<()> {
    if let Some(more) = len.checked_sub(v.len()) {
        v.try_reserve_exact(more)
            .map_err(|_| out_of_memory::<T>(len))?;
    }
    v.resize(len, value);
    Ok(())
}

/// Collects an iterator of known length into a vector allocated fallibly.
pub(crate) fn try_collect<T>(len: usize, items: impl Iterator<Item = T>) -> Result<Vec<T>> {
    let mut v = try_with_capacity(len)?;
    v.extend(items);
    Ok(v)
}

/// A vector of `len` elements the caller promises to write in full, without zeroing it first
/// (allocated fallibly: [`tessera_core::Error::OutOfMemory`] when the memory is not there).
pub(crate) fn try_uninit<T>(len: usize) -> Result<Vec<MaybeUninit<T>>> {
    let mut v = try_with_capacity(len)?;
    v.resize_with(len, MaybeUninit::uninit);
    Ok(v)
}

/// The vector once every element has been written.
///
/// # Safety
/// Every element of `v` must be initialised.
pub(crate) unsafe fn assume_init<T>(v: Vec<MaybeUninit<T>>) -> Vec<T> {
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: `MaybeUninit<T>` has the layout of `T`; the caller guarantees every element is
    // initialised; the allocation is handed over whole (pointer, length, capacity).
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<T>(), v.len(), v.capacity()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small enough for Miri: `MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks" cargo
    /// +nightly miri test -p tessera-cpu --lib miri_` runs every test whose name starts with
    /// `miri_` (see docs/SOUNDNESS.md).
    #[test]
    fn miri_zeroed_vectors_are_initialised_owned_vectors() {
        let v = try_zeroed::<f32>(7).unwrap();
        assert_eq!(v, vec![0.0f32; 7]);
        assert!(v.iter().all(|x| x.to_bits() == 0));
        // The vector owns its allocation like any other: it grows, shrinks and drops.
        let mut v = try_zeroed::<i64>(3).unwrap();
        v.push(5);
        v.truncate(1);
        v.shrink_to_fit();
        assert_eq!(v, vec![0]);
        assert_eq!(try_zeroed::<u8>(0).unwrap(), Vec::<u8>::new());
        assert_eq!(try_zeroed::<f64>(2).unwrap(), vec![0.0, 0.0]);
    }

    #[test]
    fn miri_zeroed_16_bit_floats_are_positive_zeros() {
        let h = try_zeroed::<tessera_core::f16>(5).unwrap();
        assert!(h.iter().all(|x| x.to_bits() == 0 && x.to_f32() == 0.0));
        let b = try_zeroed::<tessera_core::bf16>(3).unwrap();
        assert_eq!(b, vec![tessera_core::bf16::ZERO; 3]);
    }

    #[test]
    fn miri_impossible_requests_are_errors() {
        // Sizes whose bytes exceed isize::MAX: refused before the allocator is asked.
        for len in [usize::MAX, usize::MAX / 4 + 1, isize::MAX as usize] {
            let err = try_zeroed::<f32>(len).unwrap_err();
            assert!(matches!(err, Error::OutOfMemory { .. }), "{err:?}");
            assert!(try_filled(len, 1.0f64).is_err());
        }
        assert!(try_with_capacity::<u8>(usize::MAX).is_err());
        let err = try_zeroed::<f64>(usize::MAX).unwrap_err();
        assert_eq!(
            err,
            Error::OutOfMemory {
                device: "cpu:0".into(),
                requested_bytes: usize::MAX
            }
        );
        let mut v = vec![1u8];
        assert!(try_resize(&mut v, usize::MAX, 0).is_err());
        try_resize(&mut v, 3, 2).unwrap();
        assert_eq!(v, vec![1, 2, 2]);
        assert_eq!(try_collect(3, 0..3).unwrap(), vec![0, 1, 2]);
    }

    /// A size the allocator itself refuses (1 EiB): a null pointer, not an abort. Not for
    /// Miri, which stops the program on such a request instead of failing it.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn refused_allocations_are_errors() {
        let len = 1usize << 58; // 2^60 bytes: more than any address space
        assert!(matches!(
            try_zeroed::<f32>(len),
            Err(Error::OutOfMemory { requested_bytes, .. }) if requested_bytes == len * 4
        ));
        assert!(try_filled(len, 1.5f64).is_err());
    }
}
