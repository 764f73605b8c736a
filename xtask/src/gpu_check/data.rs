//! A small slice of Fashion-MNIST for the bundle: the first N items of an IDX file, gzipped,
//! so that `train --backend cuda` runs on a GPU machine that has no data set.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

use crate::TaskResult;

/// The IDX files of the data set, as the `train` command looks for them.
pub const IDX_FILES: [&str; 4] = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
];

/// Reads an IDX stream's header: the dtype byte, the dimensions, and the header's length.
fn read_header(bytes: &[u8]) -> TaskResult<(u8, Vec<usize>, usize)> {
    if bytes.len() < 4 || bytes[0] != 0 || bytes[1] != 0 {
        return Err("not an IDX file (bad magic number)".into());
    }
    let (dtype, rank) = (bytes[2], bytes[3] as usize);
    let header = 4 + 4 * rank;
    if rank == 0 || bytes.len() < header {
        return Err(format!("IDX header of rank {rank} is truncated").into());
    }
    let dims = (0..rank)
        .map(|d| {
            let at = 4 + 4 * d;
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize
        })
        .collect();
    Ok((dtype, dims, header))
}

/// The first `items` items (along the first dimension) of the IDX data `bytes` (ubyte
/// elements), as a complete IDX stream.
pub fn first_items(bytes: &[u8], items: usize) -> TaskResult<Vec<u8>> {
    let (dtype, mut dims, header) = read_header(bytes)?;
    if dtype != 0x08 {
        return Err(format!("IDX element type {dtype:#04x} is not unsigned bytes").into());
    }
    let per_item: usize = dims[1..].iter().product();
    let kept = items.min(dims[0]);
    let end = header + kept * per_item;
    if bytes.len() < header + dims[0] * per_item {
        return Err("IDX data is shorter than its header says".into());
    }
    dims[0] = kept;
    let mut out = bytes[..4].to_vec();
    for d in &dims {
        out.extend_from_slice(&(*d as u32).to_be_bytes());
    }
    out.extend_from_slice(&bytes[header..end]);
    Ok(out)
}

/// Writes the first `items` items of the gzipped IDX file `src` to `dst` (gzipped); returns the
/// number of items written.
pub fn truncate_gz(src: &Path, dst: &Path, items: usize) -> TaskResult<usize> {
    let file = File::open(src).map_err(|e| format!("cannot open {}: {e}", src.display()))?;
    let mut bytes = Vec::new();
    GzDecoder::new(BufReader::new(file))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot decompress {}: {e}", src.display()))?;
    let out = first_items(&bytes, items).map_err(|e| format!("{}: {e}", src.display()))?;
    let kept = read_header(&out)?.1[0];
    let file = File::create(dst).map_err(|e| format!("cannot create {}: {e}", dst.display()))?;
    let mut encoder = GzEncoder::new(BufWriter::new(file), Compression::best());
    encoder
        .write_all(&out)
        .and_then(|()| encoder.finish().map(drop))
        .map_err(|e| format!("cannot write {}: {e}", dst.display()))?;
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IDX stream of `n` 2x2 images whose bytes count up.
    fn images(n: usize) -> Vec<u8> {
        let mut bytes = vec![0, 0, 0x08, 3];
        for d in [n as u32, 2, 2] {
            bytes.extend_from_slice(&d.to_be_bytes());
        }
        bytes.extend((0..n * 4).map(|i| i as u8));
        bytes
    }

    #[test]
    fn the_first_items_keep_a_valid_header() {
        let out = first_items(&images(5), 2).unwrap();
        assert_eq!(read_header(&out).unwrap(), (0x08, vec![2, 2, 2], 16));
        assert_eq!(&out[16..], &[0, 1, 2, 3, 4, 5, 6, 7]);
        // Asking for more than there is keeps everything.
        assert_eq!(first_items(&images(3), 10).unwrap(), images(3));
    }

    #[test]
    fn malformed_streams_are_errors() {
        assert!(first_items(&[1, 2, 3], 1).is_err());
        let mut short = images(3);
        short.truncate(20);
        assert!(first_items(&short, 1).is_err());
    }

    #[test]
    fn gzip_round_trip() {
        let dir = std::env::temp_dir().join(format!("xtask-idx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("in.gz");
        let mut encoder = GzEncoder::new(File::create(&src).unwrap(), Compression::fast());
        encoder.write_all(&images(4)).unwrap();
        encoder.finish().unwrap();
        let dst = dir.join("out.gz");
        assert_eq!(truncate_gz(&src, &dst, 3).unwrap(), 3);
        let mut back = Vec::new();
        GzDecoder::new(File::open(&dst).unwrap())
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, first_items(&images(4), 3).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
