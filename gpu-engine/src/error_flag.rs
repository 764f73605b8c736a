//! The device's error flag: where indexing kernels (and the cross-entropy rows' targets)
//! record the first out-of-range index (see
//! `report_index_error` in `tessera_core`'s `common.cl.c`), read back at the next
//! synchronisation.

use tessera_core::Error;

/// Number of i32 words of the flag.
pub(crate) const FLAG_WORDS: usize = 8;

/// The error the flag's words record, if any: word 0 is the code (0 = none), words 2..3 the
/// index and 4..5 the dimension size as (low, high) halves.
pub(crate) fn decode(words: &[i32; FLAG_WORDS]) -> Option<Error> {
    let join = |lo: i32, hi: i32| (((hi as u32 as u64) << 32) | lo as u32 as u64) as i64;
    let op = match words[0] {
        0 => return None,
        1 => "index_select",
        2 => "gather",
        4 => "cross_entropy",
        5 => "cross_entropy_backward",
        _ => "scatter_add",
    };
    Some(Error::IndexOutOfRange {
        op,
        index: join(words[2], words[3]),
        size: join(words[4], words[5]).max(0) as usize,
    })
}

/// The flag's words from the bytes read back.
pub(crate) fn words_from_bytes(bytes: &[u8; FLAG_WORDS * 4]) -> [i32; FLAG_WORDS] {
    std::array::from_fn(|i| {
        i32::from_ne_bytes([
            bytes[4 * i],
            bytes[4 * i + 1],
            bytes[4 * i + 2],
            bytes[4 * i + 3],
        ])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clear_flag_is_no_error() {
        assert_eq!(decode(&[0; FLAG_WORDS]), None);
    }

    #[test]
    fn negative_and_large_indices_round_trip() {
        let index: i64 = -5_000_000_000;
        let words = [2, 0, index as i32, (index >> 32) as i32, 7, 0, 0, 0];
        assert_eq!(
            decode(&words),
            Some(Error::IndexOutOfRange {
                op: "gather",
                index,
                size: 7
            })
        );
        let mut bytes = [0u8; FLAG_WORDS * 4];
        for (i, w) in words.iter().enumerate() {
            bytes[4 * i..4 * i + 4].copy_from_slice(&w.to_ne_bytes());
        }
        assert_eq!(words_from_bytes(&bytes), words);
    }
}
