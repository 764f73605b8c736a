//! The GEMM against a naive f64 reference, over many shapes (odd sizes, `k = 0`, one row or
//! column, sizes past every block boundary), every operand layout (row- and column-major,
//! padded rows or columns, i.e. transposed and strided views), `beta` in {0, 1, 0.5}, on every
//! path this CPU supports, the blocked driver with the portable scalar micro-kernel and tiny
//! blocks, and the rayon split.
//!
//! Under Miri only the small cases of the scalar-kernel driver, the portable GEMV and the
//! packing and scratch code run (the SIMD kernels are `core::arch` intrinsics Miri cannot
//! execute, and `matrixmultiply`'s are too slow there).

use super::blocking::Blocking;
use super::microkernel::{scalar, KernelFn, MicroKernel, RowMajorA};
use super::*;

/// How a test matrix is stored.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Storage {
    RowMajor,
    ColMajor,
    /// Row-major with 3 unused elements after every row (a slice of a wider matrix).
    RowPadded,
    /// Column-major with 2 unused elements after every column (a transposed slice).
    ColPadded,
}

const STORAGES: [Storage; 4] = [
    Storage::RowMajor,
    Storage::ColMajor,
    Storage::RowPadded,
    Storage::ColPadded,
];

/// A `rows x cols` matrix in a buffer of its own, with guard values around it.
struct Mat<T> {
    data: Vec<T>,
    offset: usize,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

/// Value of a padding or guard slot: never part of a result.
const GUARD: f64 = 12345.0;

/// A deterministic value in [-1, 1) for position `i` of matrix `seed`.
fn value(seed: u64, i: usize) -> f64 {
    let mut x = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i as u64)
        .wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    (x % 2048) as f64 / 1024.0 - 1.0
}

trait Element: GemmElement {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    const EPS: f64;
}

impl Element for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    const EPS: f64 = f32::EPSILON as f64;
}

impl Element for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    const EPS: f64 = f64::EPSILON;
}

impl<T: Element> Mat<T> {
    /// A matrix stored as `storage`, filled by `fill(i, j)`, guards elsewhere.
    fn new(rows: usize, cols: usize, storage: Storage, fill: impl Fn(usize, usize) -> f64) -> Self {
        let (rs, cs) = match storage {
            Storage::RowMajor => (cols.max(1), 1),
            Storage::ColMajor => (1, rows.max(1)),
            Storage::RowPadded => (cols + 3, 1),
            Storage::ColPadded => (1, rows + 2),
        };
        let offset = 5;
        let span = if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * rs + (cols - 1) * cs + 1
        };
        let mut data = vec![T::from_f64(GUARD); offset + span + 7];
        for i in 0..rows {
            for j in 0..cols {
                data[offset + i * rs + j * cs] = T::from_f64(fill(i, j));
            }
        }
        Mat {
            data,
            offset,
            rows,
            cols,
            rs,
            cs,
        }
    }

    fn get(&self, i: usize, j: usize) -> T {
        self.data[self.offset + i * self.rs + j * self.cs]
    }

    fn view(&self) -> MatRef<T> {
        MatRef {
            ptr: self.data[self.offset..].as_ptr(),
            rs: self.rs as isize,
            cs: self.cs as isize,
        }
    }

    fn view_mut(&mut self) -> MatMut<T> {
        MatMut {
            ptr: self.data[self.offset..].as_mut_ptr(),
            rs: self.rs as isize,
            cs: self.cs as isize,
        }
    }

    /// For each slot of the buffer, whether it holds one of the matrix's elements.
    fn element_slots(&self) -> Vec<bool> {
        let mut slots = vec![false; self.data.len()];
        for i in 0..self.rows {
            for j in 0..self.cols {
                slots[self.offset + i * self.rs + j * self.cs] = true;
            }
        }
        slots
    }
}

/// One case: sizes, storages, beta.
#[derive(Clone, Copy, Debug)]
struct Case {
    m: usize,
    k: usize,
    n: usize,
    a: Storage,
    b: Storage,
    c: Storage,
    beta: f64,
}

/// Runs `case` through `multiply` and checks every element of C against the f64 reference
/// (within a rounding bound proportional to k and the magnitudes summed) and every guard slot
/// against change.
fn check<T: Element>(
    case: Case,
    multiply: impl FnOnce((usize, usize, usize), MatRef<T>, MatRef<T>, T, MatMut<T>),
) {
    let Case { m, k, n, beta, .. } = case;
    let a = Mat::<T>::new(m, k, case.a, |i, p| value(1, i * 1000 + p));
    let b = Mat::<T>::new(k, n, case.b, |p, j| value(2, p * 1000 + j));
    // With beta = 0, C starts as NaN: reading it would show in the result.
    let c0 = |i: usize, j: usize| {
        if beta == 0.0 {
            f64::NAN
        } else {
            value(3, i * 1000 + j)
        }
    };
    let mut c = Mat::<T>::new(m, n, case.c, c0);
    multiply(
        (m, k, n),
        a.view(),
        b.view(),
        T::from_f64(beta),
        c.view_mut(),
    );
    for i in 0..m {
        for j in 0..n {
            let (mut want, mut magnitude) = (0.0, 0.0);
            for p in 0..k {
                let term = a.get(i, p).to_f64() * b.get(p, j).to_f64();
                want += term;
                magnitude += term.abs();
            }
            if beta != 0.0 {
                let old = T::from_f64(c0(i, j)).to_f64();
                want += beta * old;
                magnitude += (beta * old).abs();
            }
            let got = c.get(i, j).to_f64();
            let tolerance = 2.0 * (k as f64 + 2.0) * T::EPS * magnitude.max(1.0);
            assert!(
                (got - want).abs() <= tolerance,
                "{case:?}: C[{i}][{j}] = {got}, want {want} (tolerance {tolerance})"
            );
        }
    }
    for ((index, v), is_element) in c.data.iter().enumerate().zip(c.element_slots()) {
        if !is_element {
            assert_eq!(
                v.to_f64(),
                GUARD,
                "{case:?}: slot {index} outside C was written"
            );
        }
    }
}

/// Shapes every path is checked on: small and odd ones, `k = 0`, one row or column, row
/// remainders that the short kernels take (12 + 8, 12 + 4, 6 + 3 rows over whole columns),
/// GEMVs whose depth ends in every step of the SIMD dot kernels (two vectors, one, a scalar
/// tail) and whose outputs are not a multiple of their four columns.
const SMALL_SHAPES: [(usize, usize, usize); 17] = [
    (20, 9, 64),
    (16, 33, 96),
    (9, 5, 32),
    (1, 1, 1),
    (1, 7, 5),
    (6, 7, 1),
    (2, 3, 4),
    (4, 0, 3),
    (1, 0, 9),
    (3, 1, 2),
    (13, 17, 19),
    (12, 9, 32),
    (25, 33, 65),
    (1, 70, 130),
    (131, 70, 1),
    (1, 47, 6),
    (23, 45, 1),
];

/// Shapes past the block sizes of the SIMD kernels: k past `kc`, n past `nc`, m past `mc`.
const LARGE_SHAPES: [(usize, usize, usize); 4] =
    [(37, 300, 70), (30, 20, 800), (1550, 3, 40), (100, 520, 100)];

fn every_case(shapes: &[(usize, usize, usize)], mut run: impl FnMut(Case)) {
    for &(m, k, n) in shapes {
        for (s, a) in STORAGES.into_iter().enumerate() {
            for b in STORAGES {
                for beta in [0.0, 1.0, 0.5] {
                    // Every C storage for every A, without the full product of all four.
                    let c = STORAGES[(s + (beta * 2.0) as usize) % 4];
                    run(Case {
                        m,
                        k,
                        n,
                        a,
                        b,
                        c,
                        beta,
                    });
                }
            }
        }
    }
}

fn check_path<T: Element>(path: GemmPath, shapes: &[(usize, usize, usize)]) {
    every_case(shapes, |case| {
        check::<T>(case, |dims, a, b, beta, c| {
            // SAFETY: the views address the test matrices, which hold every element.
            unsafe { gemm_on(path, dims, a, b, beta, c) }.unwrap()
        })
    });
}

/// The short scalar kernels of [`tiny_blocks`], as statics (a `'static` slice per type).
trait TinyKernels: GemmElement {
    /// 1- and 2-row kernels over step-major panels 3 wide.
    const SHORT: &'static [(usize, KernelFn<Self>)];
    /// The same over row-major panels (row stride 5).
    const SHORT_ROWS: &'static [(usize, KernelFn<Self>)];
}

macro_rules! tiny_kernels {
    ($t:ty) => {
        impl TinyKernels for $t {
            const SHORT: &'static [(usize, KernelFn<$t>)] =
                &[(1, scalar::<$t, 1, 4, 1, 3>), (2, scalar::<$t, 2, 4, 1, 3>)];
            const SHORT_ROWS: &'static [(usize, KernelFn<$t>)] =
                &[(1, scalar::<$t, 1, 4, 5, 1>), (2, scalar::<$t, 2, 4, 5, 1>)];
        }
    };
}

tiny_kernels!(f32);
tiny_kernels!(f64);

/// The scalar micro-kernel with blocks of a few elements, so that small products cross every
/// block boundary of the driver; with short kernels for 1- and 2-row remainders and, when
/// `row_major_a`, row-major A panels (row stride `kc = 5`).
fn tiny_blocks<T: TinyKernels>(row_major_a: bool) -> MicroKernel<T> {
    MicroKernel {
        name: "scalar 3x4, tiny blocks",
        mr: 3,
        nr: 4,
        kc: 5,
        mc: 6,
        nc: 8,
        run: scalar::<T, 3, 4, 1, 3>,
        short: T::SHORT,
        row_major_a: row_major_a.then_some(RowMajorA {
            run: scalar::<T, 3, 4, 5, 1>,
            short: T::SHORT_ROWS,
        }),
        transpose_pack: None,
        chosen_blocking: std::sync::OnceLock::new(),
    }
}

/// The blockings the driver is checked with: the kernel's constants, and one chosen at run
/// time that differs from them in every block (shallower than the row-major panels' `kc`, as
/// the cache model may choose; `mc` and `nc` of other multiples of the tile).
fn tiny_blockings<T>(kernel: &MicroKernel<T>) -> [Blocking; 2] {
    [
        Blocking::of_kernel(kernel),
        Blocking {
            kc: 3,
            mc: 9,
            nc: 12,
        },
    ]
}

fn check_blocked_driver<T: Element + TinyKernels>(
    shapes: &[(usize, usize, usize)],
    row_major_a: bool,
    blocking: impl Fn(&MicroKernel<T>) -> Blocking,
) {
    let kernel = tiny_blocks::<T>(row_major_a);
    let blocking = blocking(&kernel);
    every_case(shapes, |case| {
        if case.k == 0 {
            return; // the driver's contract: k > 0 (gemm_on handles k = 0 itself)
        }
        check::<T>(case, |dims, a, b, beta, c| {
            // SAFETY: as in `check_path`; the scalar kernel runs on any CPU.
            unsafe { blocked::gemm(&kernel, blocking, dims, a, b, beta, None, c) }.unwrap()
        })
    });
}

#[test]
fn the_blocked_driver_with_the_scalar_kernel_matches_the_reference() {
    // Miri: the packing, blocking and edge-tile code with its raw pointers.
    let shapes: &[_] = if cfg!(miri) {
        &[(1, 1, 1), (7, 11, 9), (4, 5, 8)]
    } else {
        &SMALL_SHAPES
    };
    for row_major_a in [false, true] {
        for which in 0..2 {
            check_blocked_driver::<f32>(shapes, row_major_a, |k| tiny_blockings(k)[which]);
            check_blocked_driver::<f64>(shapes, row_major_a, |k| tiny_blockings(k)[which]);
        }
    }
}

#[test]
fn the_portable_gemv_matches_the_reference() {
    // Miri: the GEMV loops for each layout (the `row_times_matrix` dispatch of m = 1, n = 1).
    let shapes: &[_] = if cfg!(miri) {
        &[(1, 3, 5), (4, 2, 1), (1, 0, 2)]
    } else {
        &[
            (1, 1, 1),
            (1, 7, 5),
            (6, 7, 1),
            (1, 0, 9),
            (1, 70, 130),
            (131, 70, 1),
            (1, 40, 260),
        ]
    };
    every_case(shapes, |case| {
        check::<f32>(case, |(m, k, n), a, b, beta, c| {
            // SAFETY: as in `check_path`; only m = 1 or n = 1 products, which take the GEMV.
            unsafe {
                if m == 1 {
                    gemv::row_times_matrix(
                        GemmPath::Portable,
                        k,
                        n,
                        a.ptr,
                        a.cs,
                        b,
                        beta,
                        c.ptr,
                        c.cs,
                    )
                } else {
                    gemv::row_times_matrix(
                        GemmPath::Portable,
                        k,
                        m,
                        b.ptr,
                        b.rs,
                        a.t(),
                        beta,
                        c.ptr,
                        c.rs,
                    )
                }
            }
        })
    });
}

#[test]
#[cfg_attr(miri, ignore = "SIMD intrinsics and matrixmultiply: not for Miri")]
fn every_supported_path_matches_the_reference_on_small_shapes() {
    for path in GemmPath::ALL.into_iter().filter(|p| p.is_supported()) {
        check_path::<f32>(path, &SMALL_SHAPES);
        check_path::<f64>(path, &SMALL_SHAPES);
    }
}

#[test]
#[cfg_attr(miri, ignore = "SIMD intrinsics: not for Miri")]
fn the_simd_paths_match_the_reference_past_every_block_boundary() {
    for path in [GemmPath::Avx512, GemmPath::Avx2] {
        if !path.is_supported() {
            eprintln!(
                "skipped: this CPU or build has no {} GEMM path",
                path.name()
            );
            continue;
        }
        check_path::<f32>(path, &LARGE_SHAPES);
        check_path::<f64>(path, &LARGE_SHAPES);
    }
}

#[test]
#[cfg_attr(miri, ignore = "rayon and SIMD: not for Miri")]
fn the_parallel_split_matches_the_reference_on_two_threads() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    pool.install(|| {
        assert_eq!(crate::parallel::threads(), 2);
        // Large enough to split: by columns (n >= m), by rows, and GEMVs split by outputs.
        for &(m, k, n) in &[(70, 90, 130), (150, 40, 70), (1, 300, 700), (600, 300, 1)] {
            for (a, b) in [
                (Storage::RowMajor, Storage::RowMajor),
                (Storage::RowMajor, Storage::ColPadded),
                (Storage::ColMajor, Storage::RowPadded),
            ] {
                for beta in [0.0, 1.0] {
                    let case = Case {
                        m,
                        k,
                        n,
                        a,
                        b,
                        c: Storage::RowMajor,
                        beta,
                    };
                    check::<f32>(case, |dims, a, b, beta, c| {
                        // SAFETY: as in `check_path`.
                        unsafe { try_split_gemm(Parallelism::current(), dims, a, b, beta, c) }
                            .unwrap()
                    });
                    check::<f64>(case, |dims, a, b, beta, c| {
                        // SAFETY: as in `check_path`.
                        unsafe { try_split_gemm(Parallelism::current(), dims, a, b, beta, c) }
                            .unwrap()
                    });
                }
            }
        }
    });
}

#[test]
fn every_micro_kernel_has_consistent_blocking() {
    fn consistent<T: GemmElement>(k: &'static MicroKernel<T>) {
        assert!(k.mr * k.nr <= microkernel::MAX_TILE, "{}", k.name);
        assert!(
            k.mc % k.mr == 0 && k.nc % k.nr == 0 && k.kc > 0,
            "{}",
            k.name
        );
        // So is the blocking this machine's caches (or the environment) chose.
        let b = k.blocking();
        assert!(
            b.mc % k.mr == 0 && b.nc % k.nr == 0 && b.kc > 0 && b.mc > 0 && b.nc > 0,
            "{}: {b:?}",
            k.name
        );
        assert!(k.row_major_a.is_none() || b.kc <= k.kc, "{}: {b:?}", k.name);
    }
    for path in GemmPath::ALL {
        if let Some(k) = f32::micro_kernel(path) {
            consistent(k);
        }
        if let Some(k) = f64::micro_kernel(path) {
            consistent(k);
        }
    }
    consistent(Box::leak(Box::new(tiny_blocks::<f32>(true))));
}

/// `C = A·B + R` with `R` a bias row repeated by a row stride of 0 (a linear layer's): the
/// blocked driver with the tiny scalar kernel (edge tiles, several blocks along k, both
/// blockings), `gemm_addend_on` on the portable path (its copy-then-accumulate fallback, the
/// GEMVs of one row or column and `k = 0` included) and on this CPU's path, and the split over
/// two threads (not under Miri: rayon and SIMD).
#[test]
fn products_with_an_addend_row_match_the_reference() {
    let shapes: &[(usize, usize, usize)] = if cfg!(miri) {
        &[(1, 1, 1), (7, 11, 9), (1, 4, 3), (5, 3, 1), (4, 0, 2)]
    } else {
        &[
            (1, 1, 1),
            (7, 11, 9),
            (1, 4, 3),
            (5, 3, 1),
            (4, 0, 2),
            (40, 70, 90),
            (150, 40, 70),
        ]
    };
    let kernel = tiny_blocks::<f64>(false);
    for &(m, k, n) in shapes {
        let a: Vec<f64> = (0..m * k).map(|i| (i % 7) as f64 - 3.0).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i % 5) as f64 * 0.5 - 1.0).collect();
        let bias: Vec<f64> = (0..n).map(|j| j as f64 * 0.25 + 10.0).collect();
        let want: Vec<f64> = (0..m * n)
            .map(|idx| {
                let (i, j) = (idx / n, idx % n);
                (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum::<f64>() + bias[j]
            })
            .collect();
        let addend = MatRef {
            ptr: bias.as_ptr(),
            rs: 0,
            cs: 1,
        };
        let (am, bm) = (MatRef::row_major(&a, k), MatRef::row_major(&b, n));
        let run = |what: &str, f: &dyn Fn(MatMut<f64>)| {
            let mut c = vec![f64::NAN; m * n];
            f(MatMut::row_major(&mut c, n));
            assert_eq!(c, want, "{what} {m}x{k}x{n}");
        };
        if k > 0 {
            for blocking in tiny_blockings(&kernel) {
                // SAFETY: row-major operands of the given sizes, C disjoint from them, the bias
                // row readable at every column; the scalar kernel runs on any CPU.
                run("blocked", &|c| unsafe {
                    blocked::gemm(&kernel, blocking, (m, k, n), am, bm, 0.0, Some(addend), c)
                        .unwrap()
                });
            }
        }
        // SAFETY: as above.
        run("portable", &|c| unsafe {
            gemm_addend_on(GemmPath::Portable, (m, k, n), am, bm, addend, c).unwrap()
        });
        if cfg!(miri) {
            continue;
        }
        // SAFETY: as above; the chosen path's kernels run on this CPU.
        run("chosen path", &|c| unsafe {
            gemm_addend_on(chosen_path(), (m, k, n), am, bm, addend, c).unwrap()
        });
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        pool.install(|| {
            // SAFETY: as above.
            run("split", &|c| unsafe {
                try_split_gemm_addend(Parallelism::eager(2), (m, k, n), am, bm, addend, c).unwrap()
            })
        });
    }
}
