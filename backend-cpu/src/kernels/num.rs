//! Arithmetic shared by the numeric dtypes (f32, f64, i64), with the semantics Tessera fixes:
//! integer add/mul wrap, maximum/minimum propagate NaN.

/// A numeric element type the reductions and arithmetic kernels work over.
pub(crate) trait Num:
    crate::alloc::Zeroable + Send + Sync + PartialOrd + Default + 'static
{
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;
    /// Identity of the maximum: `-inf`, or the smallest integer.
    const LOWEST: Self;
    /// Identity of the minimum: `+inf`, or the largest integer.
    const HIGHEST: Self;
    /// `a + b` (wrapping for integers).
    fn num_add(self, other: Self) -> Self;
    /// `a * b` (wrapping for integers).
    fn num_mul(self, other: Self) -> Self;
    /// True for a floating-point NaN (never for integers).
    fn num_is_nan(self) -> bool;

    /// The larger of two values; NaN if either is NaN.
    #[inline(always)]
    fn max_nan(self, other: Self) -> Self {
        if self > other || self.num_is_nan() {
            self
        } else {
            other
        }
    }

    /// The smaller of two values; NaN if either is NaN.
    #[inline(always)]
    fn min_nan(self, other: Self) -> Self {
        if self < other || self.num_is_nan() {
            self
        } else {
            other
        }
    }
}

macro_rules! impl_num_float {
    ($t:ty) => {
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            #[inline(always)]
            fn num_add(self, other: Self) -> Self {
                self + other
            }
            #[inline(always)]
            fn num_mul(self, other: Self) -> Self {
                self * other
            }
            #[inline(always)]
            fn num_is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}

impl_num_float!(f32);
impl_num_float!(f64);

impl Num for i64 {
    const ZERO: Self = 0;
    const ONE: Self = 1;
    const LOWEST: Self = i64::MIN;
    const HIGHEST: Self = i64::MAX;
    #[inline(always)]
    fn num_add(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
    #[inline(always)]
    fn num_mul(self, other: Self) -> Self {
        self.wrapping_mul(other)
    }
    #[inline(always)]
    fn num_is_nan(self) -> bool {
        false
    }
}
