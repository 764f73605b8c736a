//! A bf16 GEMM on Intel AMX tiles (`tdpbf16ps`), for CPUs that have AMX-BF16 (Sapphire
//! Rapids and later Xeons) on a Linux kernel that grants the tile data state (5.16+).
//!
//! An AMX tile register holds 16 rows of 64 bytes; `tdpbf16ps` multiplies a 16 x 32 bf16 tile
//! of A by a 32 x 16 tile of B (stored as 16 rows of k-pair words, the layout of
//! [`super::gemm_bf16`]'s B panels) into a 16 x 16 f32 tile: 8192 multiply-adds per
//! instruction, about 8x what `vdpbf16ps` does per cycle on the same core (on these CPUs
//! `vdpbf16ps` runs at half the rate of an f32 FMA, so the dot-product kernel is slower than
//! f32 there; AMX is what makes bf16 pay).
//!
//! Operands are packed once: A as panels of [`MR`] = 32 rows, each k step of 32 values a
//! row-major `32 x 32` bf16 block (`(panel, step, row, i)` at
//! `((panel * steps + step) * MR + row) * 32 + i`), B as [`super::gemm_bf16`]'s panels of 32
//! columns with the pairs rounded up to whole steps; zeros pad every edge, so the micro-kernel
//! only ever sees whole tiles. The micro-kernel keeps a `32 x 32` f32 block in four tiles
//! (`tmm0..3`) over all of k, loading two A tiles (`tmm4..5`) and two B tiles (`tmm6..7`) per
//! step, and writes it to a scratch block that is rounded once to bf16 (nearest even) into the
//! output. Like `vdpbf16ps`, `tdpbf16ps` treats subnormal inputs as
//! zero and flushes subnormal results.
//!
//! The `unsafe` parts are the permission request (a system call), the tile configuration
//! ([`Tiles`], one per thread at a time, released on drop) and the micro-kernel, which asserts
//! the lengths of the slices it reads. Miri cannot run them; the packing is tested against the
//! definition through the kernel natively where the CPU has AMX.

use super::gemm_bf16::{pack_b, zeroed, Bf16Matrix, ProductOutput};
use rayon::prelude::*;
use tessera_core::Result;

/// Rows of an A panel and of the micro-kernel's block: two 16-row tiles.
pub(crate) const MR: usize = 32;
/// Columns of a B panel and of the block: two 16-column tiles (= `gemm_bf16::NR`).
pub(crate) const NR: usize = super::gemm_bf16::NR;
/// k values per step: one A tile row holds 32 bf16.
const STEP_K: usize = 32;
/// Pairs of k values per step (rows of a B tile).
const STEP_PAIRS: usize = STEP_K / 2;
/// A panels per parallel task (128 rows).
const PANELS_PER_TASK: usize = 4;
/// Multiply-adds below which the product runs on the calling thread.
const PARALLEL_MACS: usize = 1 << 20;

/// Whether this CPU has AMX-BF16 and the kernel let this process use the tile data
/// (asked once, on first use).
pub(crate) fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(tiles::request_permission)
}

/// A (`m x k`) packed into panels of [`MR`] rows, each step a row-major `MR x 32` block.
fn pack_a(a: &Bf16Matrix, steps: usize) -> Result<Vec<u16>> {
    let panels = a.rows.div_ceil(MR);
    let mut out = zeroed::<u16>(panels * steps * MR * STEP_K)?;
    for r in 0..a.rows {
        let (panel, row) = (r / MR, r % MR);
        for step in 0..a.cols.div_ceil(STEP_K) {
            let at = ((panel * steps + step) * MR + row) * STEP_K;
            let first = step * STEP_K;
            let run = STEP_K.min(a.cols - first);
            let start = a.offset + r * a.rs + first * a.cs;
            if a.cs == 1 {
                for (word, v) in out[at..at + run]
                    .iter_mut()
                    .zip(&a.data[start..start + run])
                {
                    *word = v.to_bits();
                }
            } else {
                for (i, word) in out[at..at + run].iter_mut().enumerate() {
                    *word = a.data[start + i * a.cs].to_bits();
                }
            }
        }
    }
    Ok(out)
}

/// `A·B` (`m x k` by `k x n`) into `out` (row-major `m x n`, rounded to bf16 or kept in f32)
/// on AMX tiles. The caller checks [`available`] first.
///
/// Each `32 x 32` block is accumulated over the whole of k in the tile registers and rounded
/// once, so there is no f32 copy of the output; a B panel (`32 x k`) stays in cache while the
/// task's A panels stream past it.
pub(crate) fn gemm_amx<O: ProductOutput>(
    a: &Bf16Matrix,
    b: &Bf16Matrix,
    threads: usize,
    out: &mut [O],
) -> Result<()> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(b.rows, k, "inner dimensions");
    assert_eq!(out.len(), m * n, "output length");
    a.check_in_bounds()?;
    b.check_in_bounds()?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        for row in out.chunks_mut(NR) {
            O::store(row, &[0.0; NR][..row.len()]);
        }
        return Ok(());
    }
    let steps = k.div_ceil(STEP_K);
    let pairs = steps * STEP_PAIRS;
    let packed_a = pack_a(a, steps)?;
    let packed_b = pack_b(b, pairs)?;
    let task = |(t, rows): (usize, &mut [O])| {
        let tiles = tiles::Tiles::load();
        let first_panel = t * PANELS_PER_TASK;
        let row_count = rows.len() / n;
        let mut block = [0.0f32; MR * NR];
        for jp in 0..n.div_ceil(NR) {
            let b_panel = &packed_b[jp * pairs * NR..(jp + 1) * pairs * NR];
            let cols = NR.min(n - jp * NR);
            for ip in 0..row_count.div_ceil(MR) {
                let a_at = (first_panel + ip) * steps * MR * STEP_K;
                tiles.block(
                    &packed_a[a_at..a_at + steps * MR * STEP_K],
                    b_panel,
                    &mut block,
                );
                for i in 0..MR.min(row_count - ip * MR) {
                    let at = (ip * MR + i) * n + jp * NR;
                    O::store(&mut rows[at..at + cols], &block[i * NR..i * NR + cols]);
                }
            }
        }
    };
    let rows_per_task = MR * PANELS_PER_TASK;
    if threads > 1 && m * n * k >= PARALLEL_MACS && m > rows_per_task {
        out.par_chunks_mut(rows_per_task * n)
            .enumerate()
            .for_each(task);
    } else {
        out.chunks_mut(rows_per_task * n).enumerate().for_each(task);
    }
    Ok(())
}

#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
mod tiles {
    use super::{MR, NR, STEP_K, STEP_PAIRS};
    use std::arch::asm;
    use std::cell::Cell;
    use std::marker::PhantomData;

    /// `arch_prctl` request: permission for an extended state component.
    const ARCH_REQ_XCOMP_PERM: libc::c_ulong = 0x1023;
    /// The AMX tile data state component.
    const XFEATURE_XTILEDATA: libc::c_ulong = 18;

    /// Whether the CPU reports AMX-TILE and AMX-BF16 (CPUID leaf 7, EDX bits 24 and 22) and
    /// Linux grants this process the tile data state.
    pub(super) fn request_permission() -> bool {
        // SAFETY: CPUID exists on every x86-64 CPU; leaf 7 is read only where the maximum leaf
        // says it exists. (`__cpuid` is safe from Rust 1.87, unsafe at this crate's MSRV.)
        #[allow(unused_unsafe)]
        let leaf7 = unsafe {
            let max = std::arch::x86_64::__cpuid(0).eax;
            if max < 7 {
                return false;
            }
            std::arch::x86_64::__cpuid_count(7, 0)
        };
        let (tile, bf16) = ((leaf7.edx >> 24) & 1 == 1, (leaf7.edx >> 22) & 1 == 1);
        if !(tile && bf16) {
            return false;
        }
        // SAFETY: a plain system call with integer arguments; it changes only which state
        // components this process may use.
        let granted = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        granted == 0
    }

    /// The tile configuration (`ldtilecfg`'s 64-byte operand): palette 1, tiles 0..8 each 16
    /// rows of 64 bytes.
    #[repr(C, align(64))]
    struct Config([u8; 64]);

    impl Config {
        fn sixteen_by_sixty_four() -> Self {
            let mut bytes = [0u8; 64];
            bytes[0] = 1;
            for tile in 0..8 {
                bytes[16 + 2 * tile..18 + 2 * tile].copy_from_slice(&64u16.to_le_bytes());
                bytes[48 + tile] = 16;
            }
            Config(bytes)
        }
    }

    thread_local! {
        /// Whether a [`Tiles`] is alive on this thread (tile state is per thread).
        static LOADED: Cell<bool> = const { Cell::new(false) };
    }

    /// Proof that this thread's tile registers are configured for the micro-kernel; released
    /// (`tilerelease`) on drop. Not `Send`: the configuration belongs to the thread.
    pub(super) struct Tiles(PhantomData<*const ()>);

    impl Tiles {
        /// Configures this thread's tiles. Panics unless [`super::available`] (callers check
        /// it) or if this thread already holds a `Tiles`.
        pub(super) fn load() -> Tiles {
            assert!(super::available(), "AMX is not available to this process");
            assert!(
                !LOADED.with(|l| l.replace(true)),
                "tiles already configured on this thread"
            );
            let config = Config::sixteen_by_sixty_four();
            // SAFETY: the CPU has AMX and the process holds the tile data permission
            // (asserted); the operand is a valid 64-byte palette-1 configuration.
            unsafe {
                asm!("ldtilecfg [{cfg}]", cfg = in(reg) config.0.as_ptr(), options(nostack));
            }
            Tiles(PhantomData)
        }

        /// The `MR x NR` f32 block (row-major) of one A panel block (`steps * MR * 32` bf16
        /// bits) by one B panel block (`steps * 16 * NR` words), written over `block`.
        pub(super) fn block(&self, a: &[u16], b: &[u32], block: &mut [f32; MR * NR]) {
            let steps = a.len() / (MR * STEP_K);
            assert!(
                steps > 0 && a.len() == steps * MR * STEP_K && b.len() == steps * STEP_PAIRS * NR,
                "panel lengths"
            );
            // SAFETY: the tiles are configured (`self` exists on this thread); each step reads
            // 2 KiB of `a` (two 16-row tiles at 64-byte strides) and 2 KiB of `b` (two 16-row
            // tiles at 128-byte strides, 64 bytes apart), `steps` times, within the asserted
            // lengths; the stores write four 16 x 64-byte tiles at 128-byte strides, which is
            // exactly `block`'s 4 KiB.
            unsafe {
                asm!(
                    "tilezero tmm0",
                    "tilezero tmm1",
                    "tilezero tmm2",
                    "tilezero tmm3",
                    "2:",
                    "tileloadd tmm4, [{a} + {sa}*1]",
                    "tileloadd tmm6, [{b} + {sb}*1]",
                    "tileloadd tmm7, [{b} + {sb}*1 + 64]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    "tileloadd tmm5, [{a} + {sa}*1 + 1024]",
                    "tdpbf16ps tmm2, tmm5, tmm6",
                    "tdpbf16ps tmm3, tmm5, tmm7",
                    "add {a}, 2048",
                    "add {b}, 2048",
                    "dec {steps}",
                    "jnz 2b",
                    "tilestored [{c} + {sb}*1], tmm0",
                    "tilestored [{c} + {sb}*1 + 64], tmm1",
                    "tilestored [{c} + {sb}*1 + 2048], tmm2",
                    "tilestored [{c} + {sb}*1 + 2112], tmm3",
                    a = inout(reg) a.as_ptr() => _,
                    b = inout(reg) b.as_ptr() => _,
                    steps = inout(reg) steps => _,
                    c = in(reg) block.as_mut_ptr(),
                    sa = in(reg) 64usize,
                    sb = in(reg) 128usize,
                    options(nostack),
                );
            }
        }
    }

    impl Drop for Tiles {
        fn drop(&mut self) {
            // SAFETY: the tiles were configured by `load` on this thread.
            unsafe { asm!("tilerelease", options(nostack)) };
            LOADED.with(|l| l.set(false));
        }
    }
}

/// Builds without AMX support: never available, so [`Tiles`](tiles::Tiles) is never made.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux", not(miri))))]
mod tiles {
    use super::{MR, NR};

    pub(super) fn request_permission() -> bool {
        false
    }

    pub(super) struct Tiles;

    impl Tiles {
        pub(super) fn load() -> Tiles {
            unreachable!("AMX is never available in this build")
        }

        pub(super) fn block(&self, _: &[u16], _: &[u32], _: &mut [f32; MR * NR]) {
            unreachable!("AMX is never available in this build")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // The operands and the f64 definition the `vdpbf16ps` kernel is tested against.
    use crate::kernels::gemm_bf16::tests::{matrix, reference, values};
    use tessera_core::bf16;

    /// The product through the kernel under test.
    fn product(a: &Bf16Matrix, b: &Bf16Matrix, threads: usize) -> Vec<bf16> {
        let mut out = vec![bf16::ZERO; a.rows * b.cols];
        gemm_amx(a, b, threads, &mut out).unwrap();
        out
    }

    #[test]
    fn miri_a_panels_hold_each_row_step_by_step_with_zero_padding() {
        // 33 x 35: a second, nearly empty panel and a second, nearly empty step.
        let data = values(33 * 35, 4);
        let a = matrix(&data, 33, 35, false);
        let packed = pack_a(&a, 2).unwrap();
        assert_eq!(packed.len(), 2 * 2 * MR * STEP_K);
        for panel in 0..2 {
            for step in 0..2 {
                for row in 0..MR {
                    for i in 0..STEP_K {
                        let (r, c) = (panel * MR + row, step * STEP_K + i);
                        let want = if r < 33 && c < 35 {
                            data[r * 35 + c].to_bits()
                        } else {
                            0
                        };
                        let at = ((panel * 2 + step) * MR + row) * STEP_K + i;
                        assert_eq!(packed[at], want, "panel {panel} step {step} ({row}, {i})");
                    }
                }
            }
        }
    }

    #[test]
    fn amx_matches_the_definition_on_shapes_that_fill_and_miss_its_tiles() {
        if !available() {
            eprintln!("skipped: this CPU or kernel gives no AMX-BF16 to this process");
            return;
        }
        // Whole 32x32 blocks, partial ones, odd k, k past one block of 16 steps, several row
        // tasks split over rayon.
        for (m, k, n) in [
            (32, 32, 32),
            (1, 1, 1),
            (33, 7, 45),
            (5, 515, 40),
            (300, 600, 70),
            (200, 96, 130),
            (3, 0, 4),
        ] {
            for (transposed, threads) in [(false, 1), (true, 2)] {
                let (da, db) = (values(m * k, 1), values(k * n, 2));
                let a = matrix(&da, m, k, transposed);
                let b = matrix(&db, k, n, transposed);
                let got = product(&a, &b, threads);
                let want = reference(&a, &b);
                for (idx, (g, w)) in got.iter().zip(&want).enumerate() {
                    // Every product and partial sum of these values is exact in f32, so the
                    // only rounding is the final one to bf16.
                    assert_eq!(*g, bf16::from_f64(*w), "({m}, {k}, {n}) at {idx}");
                }
            }
        }
    }

    #[test]
    fn amx_agrees_with_the_definition_on_random_values() {
        if !available() {
            eprintln!("skipped: this CPU or kernel gives no AMX-BF16 to this process");
            return;
        }
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bf16::from_f32((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        };
        let (m, k, n) = (37, 301, 45);
        let da: Vec<bf16> = (0..m * k).map(|_| next()).collect();
        let db: Vec<bf16> = (0..k * n).map(|_| next()).collect();
        let (a, b) = (matrix(&da, m, k, false), matrix(&db, k, n, false));
        let got = product(&a, &b, 1);
        for (g, w) in got.iter().zip(&reference(&a, &b)) {
            // f32 accumulation of k products of magnitude <= 1 (a few ulps of the sum's
            // scale), then one rounding to bf16 (half an ulp of the result, 2^-9 relative).
            let tolerance = 1e-5 * k as f64 + w.abs() * 2f64.powi(-8);
            assert!((f64::from(g.to_f32()) - w).abs() <= tolerance, "{g} vs {w}");
        }
    }

    #[test]
    fn out_of_bounds_operands_are_a_typed_error() {
        let data = values(6, 0);
        let a = Bf16Matrix {
            data: &data,
            offset: 1,
            rows: 2,
            cols: 3,
            rs: 3,
            cs: 1,
        };
        let b = matrix(&data, 3, 2, false);
        let mut out = vec![bf16::ZERO; 4];
        assert!(matches!(
            gemm_amx(&a, &b, 1, &mut out),
            Err(tessera_core::Error::InvalidArgument { .. })
        ));
    }
}
