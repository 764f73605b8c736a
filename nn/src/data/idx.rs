//! Reader for IDX files, the format of MNIST and Fashion-MNIST, raw or gzip-compressed.
//!
//! An IDX file is a 4-byte magic number `00 00 TT RR` (TT: element type, `0x08` for unsigned
//! bytes; RR: the rank), then `RR` big-endian `u32` dimensions, then the elements in row-major
//! order. Labels are `0x00000801` (rank 1), images `0x00000803` (rank 3: count, rows, columns).

use crate::{Error, Result};
use flate2::read::MultiGzDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The IDX element-type byte for unsigned bytes, the only one this reader decodes.
pub const IDX_DTYPE_U8: u8 = 0x08;

/// The two leading bytes of a gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Deflate cannot expand data by more than about 1032:1.
const MAX_DEFLATE_RATIO: usize = 1032;

/// The decoded content of an IDX file of unsigned bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    /// The dimensions from the header, outermost first.
    pub dims: Vec<usize>,
    /// The elements in row-major order; `data.len()` is the product of `dims`.
    pub data: Vec<u8>,
}

/// Reads an IDX file of unsigned bytes, gunzipping it first when it starts with the gzip magic
/// (whatever its name). The header, the rank and the exact payload length are validated; any
/// problem is an error naming the file.
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let raw = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let bytes = if raw.starts_with(&GZIP_MAGIC) {
        gunzip(&raw, path)?
    } else {
        raw
    };
    parse_idx(&bytes, path)
}

/// Reads an IDX file and checks that it has rank `expected_rank`.
pub fn read_idx_with_rank(path: &Path, expected_rank: usize) -> Result<IdxArray> {
    let array = read_idx(path)?;
    if array.dims.len() != expected_rank {
        return Err(Error::format(
            path,
            format!(
                "expected an IDX array of rank {expected_rank} but the header says rank {} (dims {:?})",
                array.dims.len(),
                array.dims
            ),
        ));
    }
    Ok(array)
}

/// Decompresses a complete gzip stream (all members), failing on truncation or a bad checksum.
fn gunzip(compressed: &[u8], path: &Path) -> Result<Vec<u8>> {
    // The gzip trailer's ISIZE (uncompressed length mod 2^32) is only a hint: cap it by deflate's
    // maximum ratio so a corrupt trailer cannot trigger a huge allocation.
    let size_hint = compressed
        .len()
        .checked_sub(4)
        .map(|at| {
            let t = &compressed[at..];
            u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as usize
        })
        .unwrap_or(0)
        .min(compressed.len().saturating_mul(MAX_DEFLATE_RATIO));
    let mut out = Vec::with_capacity(size_hint);
    MultiGzDecoder::new(compressed)
        .read_to_end(&mut out)
        .map_err(|e| Error::format(path, format!("invalid or truncated gzip data: {e}")))?;
    Ok(out)
}

/// Parses the bytes of an (uncompressed) IDX file; `path` is only used in error messages.
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    if bytes.len() < 4 {
        return Err(Error::format(
            path,
            format!(
                "file has {} bytes, too short for the 4-byte IDX magic number",
                bytes.len()
            ),
        ));
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(Error::format(
            path,
            format!(
                "bad IDX magic number 0x{:02x}{:02x}{:02x}{:02x}: the first two bytes must be zero \
                 (is this an IDX file?)",
                bytes[0], bytes[1], bytes[2], bytes[3]
            ),
        ));
    }
    let dtype = bytes[2];
    if dtype != IDX_DTYPE_U8 {
        return Err(Error::format(
            path,
            format!("IDX element type 0x{dtype:02x} is not supported (only 0x08, unsigned bytes)"),
        ));
    }
    let rank = usize::from(bytes[3]);
    if rank == 0 {
        return Err(Error::format(path, "IDX header declares rank 0"));
    }
    let header_len = 4 + 4 * rank;
    if bytes.len() < header_len {
        return Err(Error::format(
            path,
            format!(
                "file has {} bytes, too short for the header of a rank-{rank} IDX array ({header_len} bytes)",
                bytes.len()
            ),
        ));
    }
    let dims: Vec<usize> = bytes[4..header_len]
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let expected = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            Error::format(
                path,
                format!("IDX dims {dims:?} overflow the addressable size"),
            )
        })?;
    let payload = &bytes[header_len..];
    if payload.len() != expected {
        let what = if payload.len() < expected {
            "truncated"
        } else {
            "has trailing bytes"
        };
        return Err(Error::format(
            path,
            format!(
                "IDX payload {what}: {} bytes but dims {dims:?} need {expected}",
                payload.len()
            ),
        ));
    }
    Ok(IdxArray {
        dims,
        data: payload.to_vec(),
    })
}

/// Serialises an array as an uncompressed IDX file of unsigned bytes (the inverse of
/// [`parse_idx`]); useful to write small test fixtures. Fails if a dimension does not fit in a
/// `u32`, the rank is 0 or above 255, or `data` does not match `dims`.
pub fn encode_idx(dims: &[usize], data: &[u8]) -> Result<Vec<u8>> {
    let invalid = |msg: String| Error::InvalidArgument {
        op: "encode_idx",
        msg,
    };
    let rank = u8::try_from(dims.len())
        .ok()
        .filter(|&r| r > 0)
        .ok_or_else(|| invalid(format!("rank {} is not in 1..=255", dims.len())))?;
    let numel = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| invalid(format!("dims {dims:?} overflow")))?;
    if numel != data.len() {
        return Err(invalid(format!(
            "dims {dims:?} need {numel} bytes but {} were given",
            data.len()
        )));
    }
    let mut out = Vec::with_capacity(4 + 4 * dims.len() + data.len());
    out.extend_from_slice(&[0, 0, IDX_DTYPE_U8, rank]);
    for &d in dims {
        let d = u32::try_from(d).map_err(|_| invalid(format!("dim {d} does not fit in u32")))?;
        out.extend_from_slice(&d.to_be_bytes());
    }
    out.extend_from_slice(data);
    Ok(out)
}

/// The file names under which the IDX array `stem` (e.g. `"train-images"`) is usually
/// distributed, in the order [`find_idx_file`] tries them: `train-images-idx3-ubyte` (the
/// original), `train-images.idx3-ubyte` (a common re-packaging), each with and without `.gz`, for
/// ranks 1 to 4.
pub fn idx_file_candidates(stem: &str) -> Vec<String> {
    let mut names = Vec::new();
    for rank in 1..=4 {
        for sep in ['-', '.'] {
            let base = format!("{stem}{sep}idx{rank}-ubyte");
            names.push(format!("{base}.gz"));
            names.push(base);
        }
    }
    names
}

/// Finds the IDX file for `stem` (e.g. `"t10k-labels"`) in `dir` under any of the names of
/// [`idx_file_candidates`]; `None` when the folder or every candidate is missing.
pub fn find_idx_file(dir: &Path, stem: &str) -> Option<PathBuf> {
    idx_file_candidates(stem)
        .into_iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
}
