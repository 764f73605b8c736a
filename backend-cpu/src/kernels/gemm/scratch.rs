//! The packing buffers of the blocked GEMM: one per thread, kept for the thread's lifetime and
//! grown (fallibly) to the largest blocks it has packed, so a GEMM allocates nothing once its
//! thread has run one of that size. Their size is bounded by the block sizes of the
//! micro-kernels (a few MiB), not by the matrices.

use std::cell::RefCell;

use super::GemmElement;
use tessera_core::{Error, Result};

/// One 64-byte cache line: the unit (and the alignment) of the buffers.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct CacheLine([u8; 64]);

thread_local! {
    /// This thread's packing buffer.
    static BUFFER: RefCell<Vec<CacheLine>> = const { RefCell::new(Vec::new()) };
}

/// The cache lines that hold `len` elements of `T`.
fn lines_for<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .map(|bytes| bytes.div_ceil(64))
        .ok_or_else(|| out_of_memory(usize::MAX))
}

fn out_of_memory(requested_bytes: usize) -> Error {
    Error::OutOfMemory {
        device: "cpu".to_string(),
        requested_bytes,
    }
}

/// Grows `buffer` to at least `lines` cache lines, or errors without changing it.
fn grow(buffer: &mut Vec<CacheLine>, lines: usize) -> Result<()> {
    if buffer.len() < lines {
        buffer
            .try_reserve_exact(lines - buffer.len())
            .map_err(|_| out_of_memory(lines.saturating_mul(64)))?;
        buffer.resize(lines, CacheLine([0; 64]));
    }
    Ok(())
}

/// Runs `f` with two disjoint, 64-byte aligned buffers of at least `a_len` and `b_len`
/// elements (contents unspecified), from this thread's packing buffer.
pub(super) fn with_buffers<T: GemmElement, R>(
    a_len: usize,
    b_len: usize,
    f: impl FnOnce(&mut [T], &mut [T]) -> R,
) -> Result<R> {
    let (a_lines, b_lines) = (lines_for::<T>(a_len)?, lines_for::<T>(b_len)?);
    let total = a_lines
        .checked_add(b_lines)
        .ok_or_else(|| out_of_memory(usize::MAX))?;
    let split = |buffer: &mut Vec<CacheLine>| -> Result<R> {
        grow(buffer, total)?;
        let (a, b) = buffer[..total].split_at_mut(a_lines);
        let per_line = 64 / std::mem::size_of::<T>();
        // SAFETY: `GemmElement` types take any bit pattern and their alignment divides 64,
        // the alignment of `CacheLine`; each slice covers exactly the lines it was given, and
        // the two are disjoint. The lines stay borrowed for the call.
        let (a, b) = unsafe {
            (
                std::slice::from_raw_parts_mut(a.as_mut_ptr().cast::<T>(), a.len() * per_line),
                std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<T>(), b.len() * per_line),
            )
        };
        Ok(f(a, b))
    };
    BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => split(&mut buffer),
        // Re-entered on this thread (a GEMM inside a GEMM; none does so today): a buffer of
        // its own for this call.
        Err(_) => split(&mut Vec::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_disjoint_and_at_least_as_long_as_asked() {
        let (pa, pb) = with_buffers::<f32, _>(5, 17, |a, b| {
            assert!(a.len() >= 5 && b.len() >= 17);
            a.fill(1.0);
            b.fill(2.0);
            assert!(a.iter().all(|&x| x == 1.0));
            (a.as_ptr() as usize, b.as_ptr() as usize)
        })
        .unwrap();
        assert_eq!((pa % 64, pb % 64), (0, 0));
        assert!(pb >= pa + 5 * 4);
    }

    #[test]
    fn a_reentrant_call_gets_its_own_buffer() {
        with_buffers::<f64, _>(3, 3, |a, _| {
            a[0] = 7.0;
            with_buffers::<f64, _>(3, 3, |inner, _| inner[0] = -1.0).unwrap();
            assert_eq!(a[0], 7.0);
        })
        .unwrap();
    }

    #[test]
    fn impossible_sizes_are_out_of_memory_errors() {
        let err = with_buffers::<f64, _>(usize::MAX / 4, 1, |_, _| ()).unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
        let err = with_buffers::<f32, _>(1 << 60, 1 << 60, |_, _| ()).unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    }
}
