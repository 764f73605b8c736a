//! The host buffers MPI sends from and receives into, allocated fallibly: a rank that cannot
//! hold a bucket's copy returns [`Error::OutOfMemory`] naming the bytes (as the CPU backend's
//! tensors do) instead of aborting the process.

use tessera_core::{Error, Result};

/// What the errors name as the device.
const HOST: &str = "host (MPI buffers)";

/// The out-of-memory error of `len` elements of `T`.
fn out_of_memory<T>(len: usize) -> Error {
    Error::OutOfMemory {
        device: HOST.to_string(),
        requested_bytes: len.saturating_mul(std::mem::size_of::<T>()),
    }
}

/// `len` default values (zeros), or [`Error::OutOfMemory`].
pub fn zeroed<T: Copy + Default>(len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| out_of_memory::<T>(len))?;
    v.resize(len, T::default());
    Ok(v)
}

/// A copy of `values`, or [`Error::OutOfMemory`].
pub fn copied<T: Copy>(values: &[T]) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(values.len())
        .map_err(|_| out_of_memory::<T>(values.len()))?;
    v.extend_from_slice(values);
    Ok(v)
}

/// `f` of each of `values`, or [`Error::OutOfMemory`].
pub fn mapped<T: Copy, U>(values: &[T], f: impl Fn(T) -> U) -> Result<Vec<U>> {
    let mut v = Vec::new();
    v.try_reserve_exact(values.len())
        .map_err(|_| out_of_memory::<U>(values.len()))?;
    v.extend(values.iter().map(|&x| f(x)));
    Ok(v)
}

/// `v` grown to `len` elements with default values (zeros; never shortened), or
/// [`Error::OutOfMemory`].
pub fn grown<T: Copy + Default>(mut v: Vec<T>, len: usize) -> Result<Vec<T>> {
    if len > v.len() {
        v.try_reserve_exact(len - v.len())
            .map_err(|_| out_of_memory::<T>(len))?;
        v.resize(len, T::default());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_hold_what_they_are_asked_for() {
        assert_eq!(zeroed::<f32>(3).unwrap(), vec![0.0; 3]);
        assert_eq!(copied(&[1u8, 2, 3]).unwrap(), vec![1, 2, 3]);
        assert_eq!(
            mapped(&[1u8, 2], |x| f32::from(x) / 2.0).unwrap(),
            vec![0.5, 1.0]
        );
        assert_eq!(grown(vec![1.0f64], 3).unwrap(), vec![1.0, 0.0, 0.0]);
        assert_eq!(grown(vec![1i64, 2], 1).unwrap(), vec![1, 2]);
    }

    #[test]
    fn an_impossible_buffer_is_a_typed_error_naming_its_bytes() {
        let len = usize::MAX / 8;
        match zeroed::<f64>(len) {
            Err(Error::OutOfMemory {
                requested_bytes, ..
            }) => assert_eq!(requested_bytes, len * 8),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            grown(vec![0u16], usize::MAX / 2),
            Err(Error::OutOfMemory { .. })
        ));
    }
}
