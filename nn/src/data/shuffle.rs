//! Deterministic shuffling: a SplitMix64 generator and the per-epoch Fisher–Yates permutation
//! derived from `(seed, epoch)`, identical on every platform and run.

/// The SplitMix64 generator (Steele, Lea and Flood, 2014): a 64-bit counter passed through a
/// strong bit mixer. Small, fast and good enough to shuffle data sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

/// The golden-ratio increment of SplitMix64.
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output mixer (a bijection on `u64`).
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    /// A generator whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The generator's state: `SplitMix64::new(g.state())` continues `g`'s stream exactly
    /// (what a run checkpoint saves).
    pub fn state(&self) -> u64 {
        self.state
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// A uniform integer in `0..bound`, without modulo bias (Lemire's multiply-and-reject);
    /// 0 when `bound` is 0.
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        let mut product = u128::from(self.next_u64()) * u128::from(bound);
        if (product as u64) < bound {
            let threshold = bound.wrapping_neg() % bound;
            while (product as u64) < threshold {
                product = u128::from(self.next_u64()) * u128::from(bound);
            }
        }
        (product >> 64) as u64
    }

    /// Shuffles `items` in place with the Fisher–Yates algorithm (every permutation equally
    /// likely).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// The generator for epoch `epoch` of a run seeded with `seed`: independent streams per epoch,
/// reproducible from the two numbers alone (no state carried between epochs).
pub fn epoch_rng(seed: u64, epoch: u64) -> SplitMix64 {
    SplitMix64::new(mix64(seed ^ mix64(epoch.wrapping_add(GOLDEN_GAMMA))))
}

/// A permutation of `0..len` fixed by `(seed, epoch)`.
pub fn epoch_permutation(len: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    epoch_rng(seed, epoch).shuffle(&mut order);
    order
}
