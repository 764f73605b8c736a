//! [`TokenWindows`]: random `block_size` windows of a token stream, and the train/validation
//! split of a corpus into them ([`TokenWindows::split`]).

use super::SplitMix64;
use tessera_core::{Backend, Error, Result, Tensor};

/// The segments of a token stream that windows are drawn from: a window of `block_size` inputs
/// and the `block_size` next tokens as targets never crosses a segment's end.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenWindows {
    tokens: Vec<u32>,
    /// Start and end (exclusive) of each segment in `tokens`.
    segments: Vec<(usize, usize)>,
    block_size: usize,
}

impl TokenWindows {
    /// Windows over the whole of `tokens`.
    pub fn new(tokens: &[usize], block_size: usize) -> Result<Self> {
        Self::from_segments(tokens, vec![(0, tokens.len())], block_size)
    }

    fn from_segments(
        tokens: &[usize],
        segments: Vec<(usize, usize)>,
        block_size: usize,
    ) -> Result<Self> {
        if block_size == 0 {
            return Err(Error::InvalidArgument {
                op: "TokenWindows",
                msg: "block_size must be positive".into(),
            });
        }
        let mut stored = host_vec(tokens.len(), 4)?;
        for &t in tokens {
            stored.push(u32::try_from(t).map_err(|_| Error::InvalidArgument {
                op: "TokenWindows",
                msg: format!("token id {t} does not fit in 32 bits"),
            })?);
        }
        let windows = TokenWindows {
            tokens: stored,
            segments: segments
                .into_iter()
                .filter(|(s, e)| e - s > block_size)
                .collect(),
            block_size,
        };
        if windows.count() == 0 {
            return Err(Error::InvalidArgument {
                op: "TokenWindows",
                msg: format!(
                    "{} tokens hold no window of {block_size} tokens plus a target",
                    tokens.len()
                ),
            });
        }
        Ok(windows)
    }

    /// The corpus cut into segments of `segment_len` tokens (at least `2 · block_size`), every
    /// `val_every`-th segment held out: `(train, validation)`. Interleaving keeps both sets
    /// drawn from the whole corpus, whatever its order (fortune files are sorted by topic).
    pub fn split(
        tokens: &[usize],
        block_size: usize,
        segment_len: usize,
        val_every: usize,
    ) -> Result<(Self, Self)> {
        let seg = segment_len.max(block_size.saturating_mul(2)).max(1);
        let every = val_every.max(2);
        let (mut train, mut val) = (Vec::new(), Vec::new());
        let mut start = 0;
        let mut n = 0;
        while start < tokens.len() {
            let end = start.saturating_add(seg).min(tokens.len());
            if n % every == every - 1 {
                val.push((start, end));
            } else {
                train.push((start, end));
            }
            start = end;
            n += 1;
        }
        Ok((
            Self::from_segments(tokens, train, block_size)?,
            Self::from_segments(tokens, val, block_size)?,
        ))
    }

    /// Window length.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Distinct windows (start positions).
    pub fn count(&self) -> usize {
        self.segments
            .iter()
            .map(|(s, e)| e - s - self.block_size)
            .sum()
    }

    /// Tokens in the segments (inputs and targets).
    pub fn tokens(&self) -> usize {
        self.segments.iter().map(|(s, e)| e - s).sum()
    }

    /// `batch` window starts drawn uniformly (with replacement) from `rng`; a `batch` whose
    /// starts cannot be allocated is `Error::OutOfMemory`.
    pub fn sample_starts(&self, batch: usize, rng: &mut SplitMix64) -> Result<Vec<usize>> {
        let total = self.count() as u64;
        let mut starts = host_vec(batch, std::mem::size_of::<usize>())?;
        starts.extend((0..batch).map(|_| {
            let mut k = rng.below(total) as usize;
            for &(s, e) in &self.segments {
                let here = e - s - self.block_size;
                if k < here {
                    return s + k;
                }
                k -= here;
            }
            unreachable!("k < count")
        }));
        Ok(starts)
    }

    /// Inputs and targets `[batch, block_size]` (i64) of the windows starting at `starts`.
    pub fn batch_at<B: Backend>(
        &self,
        starts: &[usize],
        backend: &B,
    ) -> Result<(Tensor<B>, Tensor<B>)> {
        let t = self.block_size;
        let n = starts.len().checked_mul(t).ok_or(Error::SizeOverflow {
            op: "TokenWindows",
            msg: format!("{} windows of {t} tokens", starts.len()),
        })?;
        let (mut x, mut y) = (host_vec(n, 8)?, host_vec(n, 8)?);
        for &s in starts {
            if s.checked_add(t).is_none_or(|end| end >= self.tokens.len()) {
                return Err(Error::InvalidArgument {
                    op: "TokenWindows",
                    msg: format!("window start {s} is past the last window"),
                });
            }
            x.extend(self.tokens[s..s + t].iter().map(|&v| i64::from(v)));
            y.extend(self.tokens[s + 1..s + t + 1].iter().map(|&v| i64::from(v)));
        }
        Ok((
            Tensor::from_vec(x, [starts.len(), t], backend)?,
            Tensor::from_vec(y, [starts.len(), t], backend)?,
        ))
    }

    /// A random batch: [`TokenWindows::sample_starts`] then [`TokenWindows::batch_at`].
    pub fn random_batch<B: Backend>(
        &self,
        batch: usize,
        rng: &mut SplitMix64,
        backend: &B,
    ) -> Result<(Tensor<B>, Tensor<B>)> {
        let starts = self.sample_starts(batch, rng)?;
        self.batch_at(&starts, backend)
    }
}

/// An empty host vector with room for `n` elements of `bytes` each, allocated fallibly.
fn host_vec<T>(n: usize, bytes: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
        device: "host".into(),
        requested_bytes: n.saturating_mul(bytes),
    })?;
    Ok(v)
}
