//! Fallible host allocation. Every buffer whose size follows from a tensor's size comes from
//! here, so that a request the host cannot meet is [`Error::OutOfMemory`] naming the bytes,
//! never an abort of the whole process (`Vec`'s own allocation aborts). A device backend gets
//! the same answer from its driver's allocation call and must pass it on the same way.

use tessera_core::{Error, Result};

/// The error for `len` elements of `T`.
fn out_of_memory<T>(len: usize) -> Error {
    Error::OutOfMemory {
        device: "example:0".into(),
        requested_bytes: len.saturating_mul(std::mem::size_of::<T>()),
    }
}

/// The `len` items of `items`, in a vector allocated fallibly.
pub(crate) fn collect<T>(len: usize, items: impl IntoIterator<Item = T>) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| out_of_memory::<T>(len))?;
    v.extend(items.into_iter().take(len));
    Ok(v)
}

/// `len` copies of `value`, allocated fallibly.
pub(crate) fn filled<T: Clone>(len: usize, value: T) -> Result<Vec<T>> {
    let mut v = collect(0, std::iter::empty())?;
    v.try_reserve_exact(len)
        .map_err(|_| out_of_memory::<T>(len))?;
    v.resize(len, value);
    Ok(v)
}

/// The product of `factors` (an element count), or [`Error::SizeOverflow`] naming `op`.
pub(crate) fn product(op: &'static str, factors: &[usize]) -> Result<usize> {
    factors
        .iter()
        .try_fold(1usize, |acc, &f| acc.checked_mul(f))
        .ok_or_else(|| Error::SizeOverflow {
            op,
            msg: format!("an output of {factors:?} elements overflows"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_requests_are_errors() {
        assert!(matches!(
            filled(usize::MAX, 0u8),
            Err(Error::OutOfMemory { .. })
        ));
        assert!(collect::<f64>(usize::MAX / 2, std::iter::empty()).is_err());
        assert_eq!(collect(3, 0..10).unwrap(), vec![0, 1, 2]);
        assert!(product("t", &[1 << 40, 1 << 40]).is_err());
    }
}
