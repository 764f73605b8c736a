//! The cache blocking of the blocked GEMM (`kc`, `mc`, `nc`), chosen for the caches of the CPU
//! it runs on.
//!
//! The driver (`blocked`) keeps one `mr x kc` A panel in L1 while it streams the `kc x nr` B
//! panels of a `kc x nc` B block past it from L2; the `mc x kc` A block waits in L3. So:
//!
//! * `kc`: the A panel stays in L1 while the B panels stream past it from L2 (each is used
//!   once per A panel) and C's tile arrives (the micro-kernel prefetches it before its k
//!   steps); so the A panel fills at most half of L1d, the rest for the lines passing
//!   through: the largest multiple of 32 with `mr·kc·size ≤ ½·L1d`, and no deeper than the
//!   kernel's own `kc` (tuned on the largest L1d at hand);
//! * `nc`: the B block fills three quarters of L2 (the rest for the A panel, C's tile and the
//!   next lines of A): the largest multiple of `nr` with `kc·nc·size ≤ ¾·L2`;
//! * `mc`: the A block stays within half this core's share of L3, and no larger than the
//!   kernel's own `mc` (a larger block only saves re-packing B, which the kernel's `mc`
//!   already makes rare).
//!
//! On the CPUs the constants of the micro-kernels were tuned on (AMD Zen 5: 48 KiB L1d, 1 MiB
//! L2) this gives those constants back. On a Zen 4 (32 KiB L1d, 1 MiB L2) the AVX-512 f32
//! kernel keeps them too (its 12 KiB A panel fits half of L1d), and the f64 kernel gets `kc`
//! 160 instead of 192 and `nc` 608; on a Zen 3 (32 KiB L1d, 512 KiB L2) the AVX2 kernels'
//! B blocks shrink to three quarters of 512 KiB. (Until the micro-kernels prefetched C, the
//! rule kept both panels in L1d, which gave the Zen 4 f32 kernel `kc` 160; with the prefetch
//! 256 measured faster there at n = 1024 to 4096.) Where the cache sizes cannot be read the
//! kernel's constants stand. [`BLOCKING_ENV_VAR`] overrides both, for tuning.

use std::sync::OnceLock;

use super::MicroKernel;
use crate::cpu_caches::CacheSizes;

/// The environment variable that sets the blocking by hand: `kc,mc,nc` (e.g. `256,1536,512`;
/// `mc` is rounded down to a multiple of the kernel's `mr` and `nc` to one of its `nr`).
/// Unset or empty: chosen from the caches. An unreadable value is reported once on stderr and
/// ignored.
pub const BLOCKING_ENV_VAR: &str = "TESSERA_CPU_GEMM_BLOCKING";

/// The block sizes of one blocked GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Blocking {
    /// Depth of one packed block (steps along k).
    pub(crate) kc: usize,
    /// Rows of one packed A block; a multiple of the kernel's `mr`.
    pub(crate) mc: usize,
    /// Columns of one packed B block; a multiple of the kernel's `nr`.
    pub(crate) nc: usize,
}

/// `kc` is a multiple of this (whole cache lines of every panel line, for either type).
const KC_QUANTUM: usize = 32;
/// The smallest `kc` the model picks: below it the micro-kernel's start and end dominate.
const MIN_KC: usize = 64;
/// The fewest B panels of a B block the model picks.
const MIN_NC_PANELS: usize = 4;
/// The most columns of a B block the model picks.
const MAX_NC: usize = 4096;

impl Blocking {
    /// The kernel's own constants.
    pub(crate) fn of_kernel<T>(kernel: &MicroKernel<T>) -> Blocking {
        Blocking {
            kc: kernel.kc,
            mc: kernel.mc,
            nc: kernel.nc,
        }
    }

    /// The blocking of `kernel` for `caches` (see the module's text); a level that is unknown
    /// keeps the kernel's constant for the block it sizes.
    pub(crate) fn for_caches<T>(kernel: &MicroKernel<T>, caches: &CacheSizes) -> Blocking {
        let size = std::mem::size_of::<T>();
        let (mr, nr) = (kernel.mr, kernel.nr);
        let tuned = Blocking::of_kernel(kernel);
        // Never deeper than the kernel's own `kc` (which also lays out its row-major A
        // panels, `kernel.kc` apart).
        let kc = match caches.l1d {
            Some(l1d) => {
                let fit = l1d / 2 / (mr * size);
                (fit / KC_QUANTUM * KC_QUANTUM).clamp(MIN_KC.min(tuned.kc), tuned.kc)
            }
            None => tuned.kc,
        };
        let nc = match caches.l2 {
            Some(l2) => {
                let fit = l2 / 4 * 3 / (kc * size);
                (fit / nr * nr).clamp(MIN_NC_PANELS * nr, MAX_NC / nr * nr)
            }
            None => tuned.nc,
        };
        let mc = match caches.l3_share {
            Some(l3) => {
                let fit = l3 / 2 / (kc * size);
                (fit / mr * mr).clamp(mr, tuned.mc)
            }
            None => tuned.mc,
        };
        Blocking { kc, mc, nc }
    }

    /// A [`BLOCKING_ENV_VAR`] value for `kernel`, or why it cannot be used.
    pub(crate) fn parse<T>(text: &str, kernel: &MicroKernel<T>) -> Result<Blocking, String> {
        let numbers: Vec<usize> = text
            .split(',')
            .map(|part| part.trim().parse::<usize>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("{BLOCKING_ENV_VAR}={text}: expected kc,mc,nc"))?;
        let [kc, mc, nc] = numbers[..] else {
            return Err(format!(
                "{BLOCKING_ENV_VAR}={text}: expected three numbers kc,mc,nc"
            ));
        };
        let (mc, nc) = (mc / kernel.mr * kernel.mr, nc / kernel.nr * kernel.nr);
        if kc == 0 || mc == 0 || nc == 0 {
            return Err(format!(
                "{BLOCKING_ENV_VAR}={text}: kc must be at least 1, mc at least {} and nc at least {} for {}",
                kernel.mr, kernel.nr, kernel.name
            ));
        }
        if kernel.row_major_a.is_some() && kc > kernel.kc {
            return Err(format!(
                "{BLOCKING_ENV_VAR}={text}: {} takes kc up to {}",
                kernel.name, kernel.kc
            ));
        }
        Ok(Blocking { kc, mc, nc })
    }
}

impl<T> MicroKernel<T> {
    /// The blocking this process uses with this kernel: [`BLOCKING_ENV_VAR`] if it is set and
    /// valid, else the one for this machine's caches. Chosen on first use.
    pub(crate) fn blocking(&'static self) -> Blocking {
        *self.chosen_blocking.get_or_init(|| {
            let wanted = std::env::var(BLOCKING_ENV_VAR).unwrap_or_default();
            if !wanted.trim().is_empty() {
                match Blocking::parse(&wanted, self) {
                    Ok(blocking) => return blocking,
                    Err(why) => warn_once(&why),
                }
            }
            Blocking::for_caches(self, &CacheSizes::of_this_machine())
        })
    }
}

/// Prints `why` on stderr, the first time only.
fn warn_once(why: &str) {
    static WARNED: OnceLock<()> = OnceLock::new();
    WARNED.get_or_init(|| eprintln!("backend-cpu: {why}; choosing the blocking from the caches"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::gemm::microkernel::tests_support::kernel_shaped;

    fn caches(l1d_kib: usize, l2_kib: usize, l3_share_mib: usize) -> CacheSizes {
        CacheSizes {
            l1d: Some(l1d_kib << 10),
            l2: Some(l2_kib << 10),
            l3_share: Some(l3_share_mib << 20),
        }
    }

    #[test]
    fn zen5_caches_give_back_the_constants_tuned_on_zen5() {
        // The AVX-512 kernels' shapes and constants (tuned on a Zen 5: 48 KiB L1d, 1 MiB L2).
        let zen5 = caches(48, 1024, 16);
        let f32_kernel = kernel_shaped::<f32>(12, 32, 256, 1536, 768, true);
        assert_eq!(
            Blocking::for_caches(&f32_kernel, &zen5),
            Blocking::of_kernel(&f32_kernel)
        );
        let f64_kernel = kernel_shaped::<f64>(12, 16, 192, 1536, 512, true);
        assert_eq!(
            Blocking::for_caches(&f64_kernel, &zen5),
            Blocking::of_kernel(&f64_kernel)
        );
    }

    #[test]
    fn a_smaller_l1d_gets_shallower_a_panels_that_fit_half_of_it() {
        let f32_kernel = kernel_shaped::<f32>(12, 32, 256, 1536, 768, true);
        let f64_kernel = kernel_shaped::<f64>(12, 16, 192, 1536, 512, true);
        // Zen 4 (32 KiB L1d): the f32 kernel's 12 KiB A panel fits half of it, the f64
        // kernel's (18 KiB at its own depth) does not.
        let zen4 = caches(32, 1024, 16);
        assert_eq!(
            Blocking::for_caches(&f32_kernel, &zen4),
            Blocking::of_kernel(&f32_kernel)
        );
        let b = Blocking::for_caches(&f64_kernel, &zen4);
        assert_eq!((b.kc, b.nc), (160, 608));
        assert!(12 * b.kc * 8 <= 16 << 10);
        // A 16 KiB L1d: both shallower, and their B blocks wider for the same L2.
        let small = caches(16, 1024, 16);
        let b = Blocking::for_caches(&f32_kernel, &small);
        assert_eq!((b.kc, b.nc), (160, 1216));
        assert!(12 * b.kc * 4 <= 8 << 10);
        let b = Blocking::for_caches(&f64_kernel, &small);
        assert_eq!(b.kc, 64);
    }

    #[test]
    fn a_smaller_l2_gets_a_smaller_b_block() {
        let avx2_f32 = kernel_shaped::<f32>(6, 16, 256, 1536, 512, false);
        let zen3 = Blocking::for_caches(&avx2_f32, &caches(32, 512, 16));
        let zen4 = Blocking::for_caches(&avx2_f32, &caches(32, 1024, 16));
        for b in [zen3, zen4] {
            assert_eq!(b.nc % 16, 0);
            assert_eq!(b.mc % 6, 0);
            // The A panel fits half of L1d, the B block three quarters of L2.
            assert!(6 * b.kc * 4 <= 16 << 10, "{b:?}");
        }
        assert!(zen3.kc * zen3.nc * 4 <= 384 << 10, "{zen3:?}");
        assert!(zen4.kc * zen4.nc * 4 <= 768 << 10, "{zen4:?}");
        assert!(zen3.nc < zen4.nc, "{zen3:?} {zen4:?}");
    }

    #[test]
    fn unknown_levels_keep_the_kernels_constants() {
        let kernel = kernel_shaped::<f32>(6, 16, 256, 1536, 512, false);
        assert_eq!(
            Blocking::for_caches(&kernel, &CacheSizes::default()),
            Blocking::of_kernel(&kernel)
        );
        // A tiny L3 share shrinks the A block, never below one panel.
        let tiny_l3 = CacheSizes {
            l3_share: Some(1024),
            ..CacheSizes::default()
        };
        assert_eq!(Blocking::for_caches(&kernel, &tiny_l3).mc, 6);
    }

    #[test]
    fn no_kernel_gets_a_deeper_kc_than_its_own() {
        let huge_l1 = caches(512, 1024, 16);
        let row_major = kernel_shaped::<f32>(12, 32, 256, 1536, 768, true);
        assert_eq!(Blocking::for_caches(&row_major, &huge_l1).kc, 256);
        // Its row-major A panels are laid out 256 apart: deeper cannot even be asked for.
        assert!(Blocking::parse("512,1536,768", &row_major).is_err());
        let packed = kernel_shaped::<f32>(6, 16, 192, 1536, 512, false);
        assert_eq!(Blocking::for_caches(&packed, &huge_l1).kc, 192);
    }

    #[test]
    fn hand_set_blockings_parse_and_round_to_the_tile() {
        let kernel = kernel_shaped::<f32>(6, 16, 256, 1536, 512, false);
        assert_eq!(
            Blocking::parse(" 320, 1000 ,300", &kernel),
            Ok(Blocking {
                kc: 320,
                mc: 996,
                nc: 288
            })
        );
        for bad in [
            "",
            "256,1536",
            "256,1536,512,1",
            "a,b,c",
            "0,1536,512",
            "256,5,512",
        ] {
            assert!(Blocking::parse(bad, &kernel).is_err(), "{bad:?}");
        }
    }
}
