//! Counter-based random numbers (Philox4x32-10), identical on every backend.
//!
//! Element `i` of a draw with `(seed, offset)` is a pure function of `seed` and `offset + i`, so
//! a GPU kernel computes it independently per element and every backend draws the same numbers:
//! uniform samples are bit-identical everywhere, normal samples agree to a few ulps (they go
//! through the device's `log`/`cos`). This is the scheme of PyTorch's and JAX's GPU generators.
//!
//! **Counters wrap modulo 2^64.** `offset + i` is computed modulo 2^64 everywhere a counter is
//! formed (`Backend::random`, attention dropout, [`Generator::advance`]), as Philox's own
//! counter arithmetic does: any `offset` is valid, a draw that starts near `u64::MAX` continues
//! at 0, and no backend may panic, saturate or refuse there. (A stream of 2^64 draws then
//! repeats; no tensor comes near that size.)

use crate::Distribution;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox4x32 with 10 rounds: four 32-bit random words for a 128-bit counter and 64-bit key.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let mut c = counter;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let p0 = (M0 as u64) * (c[0] as u64);
        let p1 = (M1 as u64) * (c[2] as u64);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The four random words for element `index` of the stream `seed`.
pub fn words(seed: u64, index: u64) -> [u32; 4] {
    philox4x32_10(
        [index as u32, (index >> 32) as u32, 0, 0],
        [seed as u32, (seed >> 32) as u32],
    )
}

/// Sample `index` of `dist` in f32 precision. Uniform: `w0 >> 8` scaled to `[0, 1)`.
/// Normal: Box-Muller on `u1 = ((w0 >> 8) + 1) / 2^24` and `u2 = (w1 >> 8) / 2^24`.
pub fn sample_f32(dist: Distribution, seed: u64, index: u64) -> f32 {
    let w = words(seed, index);
    const SCALE: f32 = 1.0 / (1u32 << 24) as f32;
    match dist {
        Distribution::Uniform { low, high } => {
            let u = (w[0] >> 8) as f32 * SCALE;
            low as f32 + (high - low) as f32 * u
        }
        Distribution::Normal { mean, std } => {
            let u1 = ((w[0] >> 8) + 1) as f32 * SCALE;
            let u2 = (w[1] >> 8) as f32 * SCALE;
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos();
            mean as f32 + std as f32 * z
        }
    }
}

/// Sample `index` of `dist` in f64 precision, using 53 bits from `(w0, w1)` and, for the normal's
/// second uniform, from `(w2, w3)`.
pub fn sample_f64(dist: Distribution, seed: u64, index: u64) -> f64 {
    let w = words(seed, index);
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    let bits = |hi: u32, lo: u32| (((hi as u64) << 32) | lo as u64) >> 11;
    match dist {
        Distribution::Uniform { low, high } => {
            low + (high - low) * (bits(w[0], w[1]) as f64 * SCALE)
        }
        Distribution::Normal { mean, std } => {
            let u1 = (bits(w[0], w[1]) + 1) as f64 * SCALE;
            let u2 = bits(w[2], w[3]) as f64 * SCALE;
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            mean + std * z
        }
    }
}

/// A seed plus a running counter, so successive draws don't repeat numbers.
///
/// ```
/// use tessera_core::Generator;
/// let mut g = Generator::new(42);
/// let first = g.advance(10); // reserves counters 0..10
/// assert_eq!(first, (42, 0));
/// assert_eq!(g.advance(5), (42, 10));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generator {
    seed: u64,
    offset: u64,
    /// What a draw through [`Tensor::random_from`](crate::Tensor::random_from) makes.
    draws: Draws,
}

/// What a [`Generator`]'s draws make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Draws {
    /// Samples of the distribution.
    Values,
    /// Zeros, without drawing ([`Generator::for_loading`]).
    Zeros,
    /// One zero broadcast to the shape ([`Generator::deferred`]).
    Placeholders,
}

impl Generator {
    /// A generator at the start of the stream `seed`.
    pub fn new(seed: u64) -> Self {
        Generator {
            seed,
            offset: 0,
            draws: Draws::Values,
        }
    }

    /// A generator for building a model whose every parameter is replaced right after by
    /// loaded values (PyTorch's "skip init" / meta-device construction): its draws through
    /// [`Tensor::random_from`](crate::Tensor::random_from) are zeros and cost no random numbers;
    /// on the CPU backend they are fresh zeroed pages, which the OS maps only when written, so
    /// replacing them costs neither time nor resident memory. Its counter still advances and
    /// its [`fork`](Generator::fork)s are ordinary generators.
    ///
    /// ```
    /// use tessera_core::Generator;
    /// let mut g = Generator::for_loading();
    /// assert!(g.draws_zeros());
    /// assert!(!g.fork().draws_zeros());
    /// ```
    pub fn for_loading() -> Self {
        Generator {
            draws: Draws::Zeros,
            ..Generator::new(0)
        }
    }

    /// The stream `seed` for a deferred build (PyTorch's meta device, or FSDP's deferred
    /// initialisation): each draw through
    /// [`Tensor::random_from`](crate::Tensor::random_from) is a placeholder, one zero broadcast
    /// to the shape, which costs one element of memory whatever the shape, and moves the
    /// counter as a real draw would. So a model built from it has its shapes and names but
    /// no weights, and a [`Generator::drawing`] copy taken at any point draws exactly the
    /// values a build from [`Generator::new`]`(seed)` draws from there: a part of the model
    /// can be given its values later, one part at a time. Its [`fork`](Generator::fork)s
    /// (dropout streams) are those of `Generator::new(seed)`.
    ///
    /// ```
    /// use tessera_core::Generator;
    /// let (mut real, mut deferred) = (Generator::new(7), Generator::deferred(7));
    /// assert_eq!(real.advance(1_000_000), deferred.advance(1_000_000));
    /// assert!(deferred.draws_placeholders());
    /// assert_eq!(deferred.drawing(), real);
    /// assert_eq!(deferred.fork(), real.fork());
    /// ```
    pub fn deferred(seed: u64) -> Self {
        Generator {
            draws: Draws::Placeholders,
            ..Generator::new(seed)
        }
    }

    /// Whether draws are zeros (a [`Generator::for_loading`]).
    pub fn draws_zeros(&self) -> bool {
        self.draws == Draws::Zeros
    }

    /// Whether draws are placeholders (a [`Generator::deferred`]).
    pub fn draws_placeholders(&self) -> bool {
        self.draws == Draws::Placeholders
    }

    /// This generator at the same point of its stream, drawing placeholders (a
    /// [`Generator::deferred`] of the same stream): what a build that defers one part of a
    /// model draws that part from, before going on with [`Generator::drawing`].
    pub fn deferring(&self) -> Generator {
        Generator {
            draws: Draws::Placeholders,
            ..self.clone()
        }
    }

    /// Runs `build` on this generator drawing placeholders (as [`Generator::deferring`]), then
    /// goes on from where `build` left the stream, drawing as before: one part of a model built
    /// without its values, the parts after it drawn exactly as a plain build draws them.
    ///
    /// ```
    /// use tessera_core::Generator;
    /// let (mut plain, mut g) = (Generator::new(7), Generator::new(7));
    /// let before = g.clone();
    /// let placeholders = g.defer(|inner| {
    ///     inner.advance(100);
    ///     inner.draws_placeholders()
    /// });
    /// assert!(placeholders && !g.draws_placeholders());
    /// plain.advance(100);
    /// assert_eq!(g, plain);
    /// assert_ne!(g, before);
    /// ```
    pub fn defer<T>(&mut self, build: impl FnOnce(&mut Generator) -> T) -> T {
        let mut deferring = self.deferring();
        let out = build(&mut deferring);
        self.seed = deferring.seed;
        self.offset = deferring.offset;
        out
    }

    /// This generator at the same point of its stream, drawing values: of a
    /// [`Generator::deferred`], the draws a plain build would make from here on. Other
    /// generators are returned as they are.
    pub fn drawing(&self) -> Generator {
        let draws = match self.draws {
            Draws::Placeholders => Draws::Values,
            other => other,
        };
        Generator {
            draws,
            ..self.clone()
        }
    }

    /// Returns `(seed, offset)` for a draw of `n` elements and moves past them. The counter
    /// wraps around after 2^64 elements, like the per-element counters of a draw do.
    pub fn advance(&mut self, n: usize) -> (u64, u64) {
        let at = (self.seed, self.offset);
        self.offset = self.offset.wrapping_add(n as u64);
        at
    }

    /// A generator on a new stream whose seed is the next draw of this one (which moves past
    /// it): independent streams for layers that draw on their own (dropout), reproducible from
    /// one seed.
    ///
    /// ```
    /// use tessera_core::Generator;
    /// let (mut a, mut b) = (Generator::new(7), Generator::new(7));
    /// assert_eq!(a.fork(), b.fork());
    /// assert_ne!(a.fork(), Generator::new(7));
    /// ```
    pub fn fork(&mut self) -> Generator {
        let (seed, offset) = self.advance(1);
        let w = words(seed, offset);
        Generator::new((u64::from(w[0]) << 32) | u64::from(w[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_random123_known_answer() {
        // Known-answer vectors from the Random123 distribution (kat_vectors, philox4x32_10).
        assert_eq!(
            philox4x32_10([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn uniform_samples_have_the_right_moments() {
        let d = Distribution::Uniform {
            low: -1.0,
            high: 3.0,
        };
        let n = 20_000;
        let xs: Vec<f64> = (0..n).map(|i| sample_f64(d, 7, i)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        assert!((mean - 1.0).abs() < 0.05, "mean {mean}");
        assert!(xs.iter().all(|&x| (-1.0..3.0).contains(&x)));
    }

    #[test]
    fn normal_samples_have_the_right_moments() {
        let d = Distribution::Normal {
            mean: 2.0,
            std: 0.5,
        };
        let n = 20_000;
        let xs: Vec<f32> = (0..n).map(|i| sample_f32(d, 3, i)).collect();
        let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let var = xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 2.0).abs() < 0.02, "mean {mean}");
        assert!((var - 0.25).abs() < 0.02, "var {var}");
    }
}
