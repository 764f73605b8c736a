//! Keeps freed tensor memory in the process instead of handing it back to the kernel, so that
//! the next tensor of the same size reuses warm pages.
//!
//! A training step allocates and frees the same large buffers (activations, gradients, optimizer
//! moments) every iteration. With glibc's defaults, blocks above the `mmap` threshold are mapped
//! and unmapped per allocation, and freed memory at the top of the heap is trimmed, so every step
//! pays for fresh pages that the kernel zeroes (`clear_page_erms` was 15% of an MLP step's
//! profile; page faults per run dropped 13x with this tuning). glibc caps its `mmap` threshold
//! at 32 MiB, so blocks above that (a language model's `[tokens, vocabulary]` logits and their
//! gradient: 103 MB each for 512 tokens of GPT-2's vocabulary) would still be mapped fresh and
//! unmapped every step; the tuning therefore also turns `mmap` off for the main heap
//! (`M_MMAP_MAX` 0; the heap the main thread allocates from, where a training loop runs), which
//! then grows with `brk` and keeps those blocks too (glibc still maps
//! memory where the heap cannot grow, and for other threads' arenas' oversized blocks). That
//! took a 50,257-class GPT step from about 460 to 360 ms on a Zen 4. This does for the host
//! what the GPU backends' caching allocators do for device memory.
//!
//! The tuning is process-wide (`mallopt`), so it is an explicit opt-in: a program calls
//! [`tune_allocator`] once at start (the `train` command and the benchmarks do); a library never
//! should. Set [`MALLOC_TUNING_ENV_VAR`] to `0` to make that call do nothing. Only glibc on
//! Linux is tuned; elsewhere it does nothing.

use std::sync::Once;

/// Environment variable: `0` leaves the C allocator's settings alone.
pub const MALLOC_TUNING_ENV_VAR: &str = "TESSERA_CPU_MALLOC_TUNING";

/// Blocks up to this size come from the heap rather than from `mmap` (glibc's largest allowed
/// value on 64-bit: half its 64 MiB heap size).
#[cfg(all(target_os = "linux", target_env = "gnu", not(miri)))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;

/// Free memory at the top of the heap is returned to the kernel only beyond this much.
#[cfg(all(target_os = "linux", target_env = "gnu", not(miri)))]
const TRIM_THRESHOLD: libc::c_int = 512 << 20;

static TUNE: Once = Once::new();

/// Tunes the C allocator to keep freed tensor memory in the process (a larger `mmap` threshold,
/// no `mmap` for the main heap, a larger trim threshold), once per process, unless [`MALLOC_TUNING_ENV_VAR`] is `0`. Call it at
/// the start of a training program: it changes the allocator for the whole process.
pub fn tune_allocator() {
    TUNE.call_once(|| {
        if std::env::var(MALLOC_TUNING_ENV_VAR).is_ok_and(|v| v.trim() == "0") {
            return;
        }
        apply();
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu", not(miri)))]
fn apply() {
    // SAFETY: `mallopt` only changes allocator parameters; it is called once, before this
    // backend allocates, and a rejected value leaves the previous setting in place.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

/// Elsewhere, and under Miri (which cannot call C functions), nothing to tune.
#[cfg(not(all(target_os = "linux", target_env = "gnu", not(miri))))]
fn apply() {}
