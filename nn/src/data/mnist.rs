//! MNIST-like data sets: a folder of IDX files `{train,t10k}-{images,labels}` (MNIST,
//! Fashion-MNIST, KMNIST, ...), decoded into raw bytes.

use crate::data::idx::{find_idx_file, idx_file_candidates, read_idx_with_rank};
use crate::{Error, Result};
use std::fmt;
use std::path::{Path, PathBuf};

/// Where Debian's `dataset-fashion-mnist` package installs Fashion-MNIST.
pub const FASHION_MNIST_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// How to obtain MNIST-like data, shown when it is missing.
pub const MISSING_DATA_HINT: &str = "install Fashion-MNIST with `apt-get install dataset-fashion-mnist` \
     (the files land in /usr/share/datasets/fashion-mnist/), or point --data at a folder holding the \
     MNIST or Fashion-MNIST IDX files (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], \
     t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz])";

/// Which part of the data set to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Split {
    /// The training set (`train-*` files; 60 000 items for MNIST).
    Train,
    /// The test set (`t10k-*` files; 10 000 items for MNIST).
    Test,
}

impl Split {
    /// The file-name prefix of this split: `"train"` or `"t10k"`.
    pub fn file_prefix(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "t10k",
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Split::Train => "train",
            Split::Test => "test",
        })
    }
}

/// One split of an MNIST-like data set: `len()` grey-scale images of `rows x cols` bytes and one
/// byte label each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MnistLike {
    images: Vec<u8>,
    labels: Vec<u8>,
    rows: usize,
    cols: usize,
}

impl MnistLike {
    /// Loads split `split` from the IDX files in `dir` (any of the usual names, raw or gzip).
    ///
    /// A missing folder or file is [`Error::MissingData`] with instructions to install the data;
    /// a corrupt file is [`Error::Format`] naming it; images and labels that disagree on the
    /// number of items are an error too.
    pub fn load(dir: impl AsRef<Path>, split: Split) -> Result<Self> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(Error::MissingData {
                path: dir.to_path_buf(),
                hint: format!("the folder does not exist; {MISSING_DATA_HINT}"),
            });
        }
        let images_path = locate(dir, &format!("{}-images", split.file_prefix()), 3)?;
        let labels_path = locate(dir, &format!("{}-labels", split.file_prefix()), 1)?;
        let images = read_idx_with_rank(&images_path, 3)?;
        let labels = read_idx_with_rank(&labels_path, 1)?;
        if images.dims[0] != labels.dims[0] {
            return Err(Error::format(
                &labels_path,
                format!(
                    "{} labels but {} has {} images",
                    labels.dims[0],
                    images_path.display(),
                    images.dims[0]
                ),
            ));
        }
        Self::from_raw(images.data, [images.dims[1], images.dims[2]], labels.data)
    }

    /// Builds a data set from raw image bytes (row-major `[n, rows, cols]`) and `n` labels.
    pub fn from_raw(images: Vec<u8>, [rows, cols]: [usize; 2], labels: Vec<u8>) -> Result<Self> {
        let pixels = rows.checked_mul(cols).filter(|&p| p > 0);
        let consistent = pixels
            .and_then(|p| labels.len().checked_mul(p))
            .is_some_and(|total| total == images.len());
        if !consistent {
            return Err(Error::InvalidArgument {
                op: "MnistLike::from_raw",
                msg: format!(
                    "{} image bytes do not hold {} images of {rows}x{cols} (non-empty) pixels",
                    images.len(),
                    labels.len()
                ),
            });
        }
        Ok(MnistLike {
            images,
            labels,
            rows,
            cols,
        })
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there is no item.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Image height in pixels.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Image width in pixels.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Pixels per image (`rows * cols`).
    pub fn pixels_per_image(&self) -> usize {
        self.rows * self.cols
    }

    /// The dims of the image array: `[len, rows, cols]`.
    pub fn image_dims(&self) -> [usize; 3] {
        [self.len(), self.rows, self.cols]
    }

    /// All image bytes, row-major `[len, rows, cols]`.
    pub fn images(&self) -> &[u8] {
        &self.images
    }

    /// All labels.
    pub fn labels(&self) -> &[u8] {
        &self.labels
    }

    /// The pixels of image `index`, or `None` beyond the end.
    pub fn image(&self, index: usize) -> Option<&[u8]> {
        let p = self.pixels_per_image();
        self.images
            .get(index.checked_mul(p)?..(index + 1).checked_mul(p)?)
    }

    /// The label of item `index`, or `None` beyond the end.
    pub fn label(&self, index: usize) -> Option<u8> {
        self.labels.get(index).copied()
    }

    /// How many items carry each label, indexed by label (length: largest label + 1).
    pub fn class_histogram(&self) -> Vec<usize> {
        let classes = self.labels.iter().max().map_or(0, |&m| usize::from(m) + 1);
        let mut counts = vec![0; classes];
        for &l in &self.labels {
            counts[usize::from(l)] += 1;
        }
        counts
    }
}

/// Finds the IDX file `stem` in `dir` or explains which names were tried and how to get them.
/// `rank` only narrows the names listed in the message.
fn locate(dir: &Path, stem: &str, rank: usize) -> Result<PathBuf> {
    let rank_tag = format!("idx{rank}");
    find_idx_file(dir, stem).ok_or_else(|| Error::MissingData {
        path: dir.to_path_buf(),
        hint: format!(
            "no `{stem}` IDX file (looked for {}); {MISSING_DATA_HINT}",
            idx_file_candidates(stem)
                .into_iter()
                .filter(|n| n.contains(&rank_tag))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}
