//! Reader for IDX files, the format of MNIST and Fashion-MNIST, raw or gzip-compressed.
//!
//! An IDX file is a 4-byte magic number `00 00 TT RR` (TT: element type, `0x08` for unsigned
//! bytes; RR: the rank), then `RR` big-endian `u32` dimensions, then the elements in row-major
//! order. Labels are `0x00000801` (rank 1), images `0x00000803` (rank 3: count, rows, columns).

use crate::{Error, Result};
use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// The IDX element-type byte for unsigned bytes, the only one this reader decodes.
pub const IDX_DTYPE_U8: u8 = 0x08;

/// The two leading bytes of a gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The payload is read (and its buffer grown) this many bytes at a time.
const CHUNK: usize = 64 * 1024;

/// Trailing bytes after a gzip payload are counted up to this many (a corrupt stream could
/// decompress for ever).
const TRAILING_COUNT_LIMIT: u64 = 64 << 20;

/// The decoded content of an IDX file of unsigned bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    /// The dimensions from the header, outermost first.
    pub dims: Vec<usize>,
    /// The elements in row-major order; `data.len()` is the product of `dims`.
    pub data: Vec<u8>,
}

/// Reads an IDX file of unsigned bytes, gunzipping it on the fly when it starts with the gzip
/// magic (whatever its name). The header is read and validated first (magic, element type,
/// rank, dims whose product fits); then the payload is streamed into a buffer that grows with
/// the data actually read, never beyond the size the header claims, so a small file claiming a
/// huge payload costs nothing and a compressed file costs only its decompressed size. A
/// payload shorter or longer than the header says, a corrupt gzip stream (bad deflate data,
/// CRC or length) and a payload the host cannot hold are errors naming the file.
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let file_len = file.metadata().map(|m| m.len()).ok();
    let mut reader = BufReader::with_capacity(CHUNK, file);
    let head = reader.fill_buf().map_err(|e| Error::io(path, e))?;
    if head.starts_with(&GZIP_MAGIC) {
        decode(&mut MultiGzDecoder::new(reader), path, Source::Gzip, None)
    } else {
        decode(&mut reader, path, Source::Raw, file_len)
    }
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

/// Parses the bytes of an (uncompressed) IDX file; `path` is only used in error messages.
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    let mut reader = bytes;
    decode(&mut reader, path, Source::Raw, Some(bytes.len() as u64))
}

/// Where the bytes come from: read errors of a raw source are I/O errors, those of a gzip
/// stream mean corrupt data.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Raw,
    Gzip,
}

/// A read failure of `source` as an error naming `path`.
fn read_error(path: &Path, source: Source, e: std::io::Error) -> Error {
    match source {
        Source::Gzip => Error::format(path, format!("invalid or truncated gzip data: {e}")),
        Source::Raw => Error::io(path, e),
    }
}

/// Reads into `buf` until it is full or the input ends; returns how many bytes were read.
fn read_up_to(r: &mut impl Read, buf: &mut [u8], path: &Path, source: Source) -> Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(read_error(path, source, e)),
        }
    }
    Ok(filled)
}

/// Decodes an IDX stream: the header first, then a payload of exactly the size it claims.
/// `total_len` is the size of a raw source when known, so that a wrong payload length is
/// reported without reading it.
fn decode(
    r: &mut impl Read,
    path: &Path,
    source: Source,
    total_len: Option<u64>,
) -> Result<IdxArray> {
    let mut magic = [0u8; 4];
    let got = read_up_to(r, &mut magic, path, source)?;
    if got < 4 {
        return Err(Error::format(
            path,
            format!("file has {got} bytes, too short for the 4-byte IDX magic number"),
        ));
    }
    if magic[0] != 0 || magic[1] != 0 {
        return Err(Error::format(
            path,
            format!(
                "bad IDX magic number 0x{:02x}{:02x}{:02x}{:02x}: the first two bytes must be zero \
                 (is this an IDX file?)",
                magic[0], magic[1], magic[2], magic[3]
            ),
        ));
    }
    let dtype = magic[2];
    if dtype != IDX_DTYPE_U8 {
        return Err(Error::format(
            path,
            format!("IDX element type 0x{dtype:02x} is not supported (only 0x08, unsigned bytes)"),
        ));
    }
    let rank = usize::from(magic[3]);
    if rank == 0 {
        return Err(Error::format(path, "IDX header declares rank 0"));
    }
    let header_len = 4 + 4 * rank;
    let mut raw_dims = vec![0u8; 4 * rank];
    let got = read_up_to(r, &mut raw_dims, path, source)?;
    if got < raw_dims.len() {
        return Err(Error::format(
            path,
            format!(
                "file has {} bytes, too short for the header of a rank-{rank} IDX array ({header_len} bytes)",
                4 + got
            ),
        ));
    }
    let dims: Vec<usize> = raw_dims
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
    let length_error = |got: u64| {
        let what = if got < expected as u64 {
            "truncated"
        } else {
            "has trailing bytes"
        };
        Error::format(
            path,
            format!("IDX payload {what}: {got} bytes but dims {dims:?} need {expected}"),
        )
    };
    if let Some(total) = total_len {
        let payload = total.saturating_sub(header_len as u64);
        if payload != expected as u64 {
            return Err(length_error(payload));
        }
    }
    let data = read_payload(r, expected, path, source, &length_error)?;
    Ok(IdxArray { dims, data })
}

/// Reads exactly `expected` bytes and checks that nothing follows them. The buffer grows with
/// the bytes read (at most doubling, never past `expected`), fallibly.
fn read_payload(
    r: &mut impl Read,
    expected: usize,
    path: &Path,
    source: Source,
    length_error: &dyn Fn(u64) -> Error,
) -> Result<Vec<u8>> {
    let out_of_memory = || {
        Error::format(
            path,
            format!("the IDX payload of {expected} bytes does not fit in memory"),
        )
    };
    let mut data: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    while data.len() < expected {
        let want = CHUNK.min(expected - data.len());
        let n = read_up_to(r, &mut chunk[..want], path, source)?;
        if n == 0 {
            return Err(length_error(data.len() as u64));
        }
        if data.capacity() - data.len() < n {
            let target = (data.len() * 2)
                .max(data.len() + n)
                .max(CHUNK)
                .min(expected);
            data.try_reserve_exact(target - data.len())
                .map_err(|_| out_of_memory())?;
        }
        data.extend_from_slice(&chunk[..n]);
    }
    // Anything after the payload is an error; reading to the end also makes the gzip decoder
    // check its CRC and length.
    let mut trailing = 0u64;
    loop {
        let n = read_up_to(r, &mut chunk, path, source)?;
        if n == 0 || trailing >= TRAILING_COUNT_LIMIT {
            break;
        }
        trailing += n as u64;
    }
    if trailing > 0 {
        return Err(length_error(expected as u64 + trailing));
    }
    Ok(data)
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
