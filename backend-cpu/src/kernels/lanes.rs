//! How an element-wise kernel reads and writes its storage type while computing in another:
//! the identity for f32, f64 and the integers, and for bf16 a widening to f32 (exact) on the
//! way in and one rounding to nearest even on the way out, bit for bit what
//! [`super::cast::cast`] does. Written per element inside the map's loop, the conversions
//! vectorise with it: a bf16 map is then one pass over 16-bit memory instead of the three
//! passes (widen, compute in f32, round) and two f32 buffers of tensor-core's widening.

use std::mem::MaybeUninit;
use tessera_core::bf16;

use super::cast::f32_to_bf16;
use super::wide::map_contiguous;

/// Elements per block of [`zip_through_f32`].
const BLOCK: usize = 256;

/// A storage element read as `C` and written from `C` (see the module docs).
pub(crate) trait Lane<C>: Copy + Send + Sync + 'static {
    /// The value as the computation's type.
    fn load(self) -> C;
    /// A computed value rounded to the storage type.
    fn store(value: C) -> Self;
}

macro_rules! identity_lane {
    ($($t:ty),*) => {$(
        impl Lane<$t> for $t {
            #[inline(always)]
            fn load(self) -> $t {
                self
            }
            #[inline(always)]
            fn store(value: $t) -> $t {
                value
            }
        }
    )*};
}
identity_lane!(f32, f64, i64, u8);

impl Lane<f32> for bf16 {
    #[inline(always)]
    fn load(self) -> f32 {
        f32::from_bits(u32::from(self.to_bits()) << 16)
    }
    #[inline(always)]
    fn store(value: f32) -> bf16 {
        f32_to_bf16(value)
    }
}

/// `out[i] = S::store(f(a[i].load(), b[i].load()))`, computed block by block: each block of `a`
/// and `b` is widened into f32 arrays on the stack, `kernel` runs an f32 loop over them, and its
/// results are rounded into `out`. For kernels too long to be inlined into a loop together
/// with the conversions (the compiler then calls them once per element, in scalar code):
/// `kernel` is the same loop as for f32 storage. Runs over the common length of the slices.
pub(crate) fn zip_through_f32<S: Lane<f32>>(
    out: &mut [MaybeUninit<S>],
    a: &[S],
    b: &[S],
    kernel: impl Fn(&mut [f32], &[f32], &[f32]),
) {
    let len = out.len().min(a.len()).min(b.len());
    let (mut wide_a, mut wide_b, mut result) = ([0.0f32; BLOCK], [0.0f32; BLOCK], [0.0f32; BLOCK]);
    for start in (0..len).step_by(BLOCK) {
        let n = BLOCK.min(len - start);
        map_contiguous(&mut wide_a[..n], &a[start..start + n], &|v: S| v.load());
        map_contiguous(&mut wide_b[..n], &b[start..start + n], &|v: S| v.load());
        kernel(&mut result[..n], &wide_a[..n], &wide_b[..n]);
        map_contiguous(&mut out[start..start + n], &result[..n], &|v: f32| {
            MaybeUninit::new(S::store(v))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miri_bf16_lanes_widen_exactly_and_round_like_the_cast() {
        // Every bf16 bit pattern widens to the value `half` gives (NaNs stay NaN).
        for bits in (0..=u16::MAX).step_by(7) {
            let h = bf16::from_bits(bits);
            let wide = <bf16 as Lane<f32>>::load(h);
            if h.is_nan() {
                assert!(wide.is_nan());
            } else {
                assert_eq!(wide.to_bits(), h.to_f32().to_bits(), "{bits:#06x}");
            }
        }
        // Ties round to even, NaNs stay quiet NaNs, infinities and overflow as the cast.
        for v in [
            1.0f32,
            1.003_906_2,
            1.011_718_8,
            -3.4e38,
            f32::INFINITY,
            1e-40,
            f32::NAN,
        ] {
            let got = <bf16 as Lane<f32>>::store(v);
            let want = f32_to_bf16(v);
            assert_eq!(got.to_bits(), want.to_bits(), "{v}");
        }
        assert_eq!(
            <bf16 as Lane<f32>>::store(1.0 + 2f32.powi(-8)).to_f32(),
            1.0
        );
        assert_eq!(
            <bf16 as Lane<f32>>::store(1.0 + 3.0 * 2f32.powi(-8)).to_f32(),
            1.015625
        );
    }

    #[test]
    fn miri_zip_through_f32_writes_every_output_as_the_per_element_map() {
        for len in [0, 1, 5, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 3] {
            let a: Vec<bf16> = (0..len)
                .map(|i| bf16::from_f32(i as f32 * 0.37 - 9.0))
                .collect();
            let b: Vec<bf16> = (0..len)
                .map(|i| bf16::from_f32(1.5 - i as f32 * 0.11))
                .collect();
            let mut out = vec![MaybeUninit::new(bf16::from_f32(f32::NAN)); len];
            let f = |x: f32, y: f32| x * y + 0.1;
            zip_through_f32(&mut out, &a, &b, |o, x, y| {
                for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                    *o = f(x, y);
                }
            });
            for i in 0..len {
                // SAFETY: initialised above (and overwritten by the call).
                let got = unsafe { out[i].assume_init() };
                let want = <bf16 as Lane<f32>>::store(f(a[i].load(), b[i].load()));
                assert_eq!(got.to_bits(), want.to_bits(), "len {len} at {i}");
            }
        }
    }
}
