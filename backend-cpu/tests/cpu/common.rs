//! Test helpers: deterministic data, naive strided reads and tolerant comparisons.

use tessera_core::Layout;
use tessera_cpu::{Cpu, CpuTensor};

/// The CPU backend.
pub fn cpu() -> Cpu {
    Cpu::new()
}

/// `n` deterministic values in `[lo, hi)` from a 64-bit LCG (independent of the backend's RNG).
pub fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            lo + (hi - lo) * u
        })
        .collect()
}

/// An f32 tensor of `dims` holding `data` (rounded to f32).
pub fn tensor_f32(data: &[f64], dims: &[usize]) -> CpuTensor {
    CpuTensor::from_vec(data.iter().map(|&v| v as f32).collect(), dims, &cpu()).unwrap()
}

/// An f64 tensor of `dims` holding `data`.
pub fn tensor_f64(data: &[f64], dims: &[usize]) -> CpuTensor {
    CpuTensor::from_vec(data.to_vec(), dims, &cpu()).unwrap()
}

/// `data` rounded to f32 and back, so references see exactly what an f32 tensor holds.
pub fn as_f32(data: &[f64]) -> Vec<f64> {
    data.iter().map(|&v| v as f32 as f64).collect()
}

/// The elements `layout` selects from `storage`, read naively in row-major order by
/// enumerating every multi-index.
pub fn read_layout<T: Copy>(storage: &[T], layout: &Layout) -> Vec<T> {
    let dims = layout.dims();
    let n: usize = dims.iter().product();
    (0..n)
        .map(|flat| {
            let index = unravel(flat, dims);
            let offset = index
                .iter()
                .zip(layout.strides())
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>()
                + layout.offset() as isize;
            storage[offset as usize]
        })
        .collect()
}

/// The values of a view `t` of a tensor created from `data` (row-major): the naive reference.
pub fn view_of(data: &[f64], t: &CpuTensor) -> Vec<f64> {
    read_layout(data, t.layout())
}

/// Row-major multi-index of `flat` in `dims`.
pub fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        index[d] = flat % dims[d];
        flat /= dims[d];
    }
    index
}

/// Row-major flat position of `index` in `dims`.
pub fn ravel(index: &[usize], dims: &[usize]) -> usize {
    index.iter().zip(dims).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// Asserts `got` matches `want` within `atol + rtol * |want|`; NaN must match NaN and
/// infinities must match exactly.
pub fn assert_close(got: &[f64], want: &[f64], rtol: f64, atol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// Asserts two f64 sequences are bit-identical except that any NaN matches any NaN.
pub fn assert_same_bits(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits();
        assert!(ok, "{what}: element {i}: got {g:?}, want {w:?}");
    }
}

/// The error function by its Maclaurin series (|x| <= 4) or ±1 beyond: an f64 reference
/// independent of libm, accurate to ~1e-10 on the ranges the tests use.
pub fn erf_reference(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x.abs() > 5.5 {
        return x.signum();
    }
    let mut term = x;
    let mut sum = x;
    let x2 = x * x;
    for n in 1..200 {
        term *= -x2 / n as f64;
        let add = term / (2 * n + 1) as f64;
        sum += add;
        if add.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// A family of views of a `[4, 6, 5]` tensor built from `data` (120 values) that covers the
/// kernel paths: contiguous, transposed, stepped slice, broadcast, and a narrowed permutation.
/// Each is `[a, b, c]`-shaped with 3 dims, but the shapes differ.
pub fn views(base: &CpuTensor) -> Vec<(&'static str, CpuTensor)> {
    vec![
        ("contiguous", base.clone()),
        ("transposed", base.transpose(0, 2).unwrap()),
        (
            "stepped",
            base.slice(1, 1, 6, 2).unwrap().slice(2, 0, 5, 3).unwrap(),
        ),
        (
            "broadcast",
            base.narrow(0, 1, 1)
                .unwrap()
                .broadcast_to([3, 6, 5])
                .unwrap(),
        ),
        (
            "permuted",
            base.narrow(1, 2, 3).unwrap().permute(&[1, 2, 0]).unwrap(),
        ),
    ]
}
