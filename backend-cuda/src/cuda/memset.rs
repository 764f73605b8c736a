//! How a fill with an element's bytes becomes CUDA memsets: the driver has 8-, 16- and 32-bit
//! memsets and a pitched 2-D 32-bit one, so 8-byte elements whose halves differ take two strided
//! fills. [`plan`] is pure (no GPU needed) so that every element size is tested here; the
//! driver only executes the plan.

/// One memset on the device's stream, at `offset` bytes from the start of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Memset {
    /// `cuMemsetD8Async`: `count` bytes set to `value`.
    D8 {
        offset: usize,
        value: u8,
        count: usize,
    },
    /// `cuMemsetD16Async`: `count` 16-bit words set to `value`.
    D16 {
        offset: usize,
        value: u16,
        count: usize,
    },
    /// `cuMemsetD32Async`: `count` 32-bit words set to `value`.
    D32 {
        offset: usize,
        value: u32,
        count: usize,
    },
    /// `cuMemsetD2D32Async` with a width of one word: the first 32-bit word of each of `rows`
    /// rows `pitch` bytes apart set to `value`.
    Strided32 {
        offset: usize,
        pitch: usize,
        value: u32,
        rows: usize,
    },
}

/// The memsets that fill `bytes` bytes with copies of `pattern` (an element's native-endian
/// bytes): one for 1-, 2- and 4-byte patterns and for 8-byte patterns with equal halves, two
/// strided ones otherwise. An error names a pattern length no element has, or a length that
/// does not divide `bytes`.
pub(crate) fn plan(pattern: &[u8], bytes: usize) -> Result<Vec<Memset>, String> {
    if pattern.is_empty() || bytes % pattern.len() != 0 {
        return Err(format!(
            "{bytes} bytes are not a whole number of {}-byte elements",
            pattern.len()
        ));
    }
    let count = bytes / pattern.len();
    let word = |b: &[u8]| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
    Ok(match pattern.len() {
        1 => vec![Memset::D8 {
            offset: 0,
            value: pattern[0],
            count,
        }],
        2 => vec![Memset::D16 {
            offset: 0,
            value: u16::from_ne_bytes([pattern[0], pattern[1]]),
            count,
        }],
        4 => vec![Memset::D32 {
            offset: 0,
            value: word(pattern),
            count,
        }],
        8 => {
            let (low, high) = (word(&pattern[..4]), word(&pattern[4..]));
            if low == high {
                vec![Memset::D32 {
                    offset: 0,
                    value: low,
                    count: 2 * count,
                }]
            } else {
                vec![
                    Memset::Strided32 {
                        offset: 0,
                        pitch: 8,
                        value: low,
                        rows: count,
                    },
                    Memset::Strided32 {
                        offset: 4,
                        pitch: 8,
                        value: high,
                        rows: count,
                    },
                ]
            }
        }
        other => return Err(format!("unsupported pattern of {other} bytes")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::DType;

    /// What the driver does with `memsets` on a buffer of `bytes` bytes (None: left unwritten),
    /// written from the CUDA driver API's definitions of the four functions.
    fn execute(memsets: &[Memset], bytes: usize) -> Vec<Option<u8>> {
        let mut memory = vec![None; bytes];
        let mut put = |at: usize, value: &[u8]| {
            for (i, b) in value.iter().enumerate() {
                memory[at + i] = Some(*b);
            }
        };
        for memset in memsets {
            match *memset {
                Memset::D8 {
                    offset,
                    value,
                    count,
                } => (0..count).for_each(|i| put(offset + i, &[value])),
                Memset::D16 {
                    offset,
                    value,
                    count,
                } => (0..count).for_each(|i| put(offset + 2 * i, &value.to_ne_bytes())),
                Memset::D32 {
                    offset,
                    value,
                    count,
                } => (0..count).for_each(|i| put(offset + 4 * i, &value.to_ne_bytes())),
                Memset::Strided32 {
                    offset,
                    pitch,
                    value,
                    rows,
                } => (0..rows).for_each(|i| put(offset + pitch * i, &value.to_ne_bytes())),
            }
        }
        memory
    }

    #[test]
    fn every_dtype_fills_every_byte_with_its_pattern() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for dtype in DType::ALL {
            let size = dtype.size_in_bytes();
            for elements in [0, 1, 3, 17] {
                for halves_equal in [false, true] {
                    let mut pattern: Vec<u8> = (0..size)
                        .map(|_| {
                            seed ^= seed << 13;
                            seed ^= seed >> 7;
                            seed ^= seed << 17;
                            (seed >> 32) as u8
                        })
                        .collect();
                    if halves_equal && size == 8 {
                        let (low, high) = pattern.split_at_mut(4);
                        high.copy_from_slice(low);
                    }
                    let bytes = size * elements;
                    let memsets = plan(&pattern, bytes)
                        .unwrap_or_else(|e| panic!("{dtype}: no memset plan: {e}"));
                    let expected: Vec<Option<u8>> = pattern
                        .iter()
                        .cycle()
                        .take(bytes)
                        .map(|b| Some(*b))
                        .collect();
                    assert_eq!(execute(&memsets, bytes), expected, "{dtype} x {elements}");
                }
            }
        }
    }

    #[test]
    fn sizes_no_element_has_are_refused_by_name() {
        assert!(plan(&[1, 2, 3], 6).unwrap_err().contains("3 bytes"));
        assert!(plan(&[1, 2], 3).unwrap_err().contains("not a whole number"));
        assert!(plan(&[], 0).is_err());
    }
}
