//! The opt-in allocator tuning keeps even blocks above glibc's largest `mmap` threshold in the
//! process: the second buffer of the same size reuses the first one's pages instead of faulting
//! in fresh ones. Its own test binary without libtest's harness (`harness = false`): the tuning
//! is process-wide, and it keeps the main thread's blocks, where libtest runs each test on a
//! thread of its own.

fn main() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tuned_allocator_reuses_blocks_above_the_mmap_threshold();
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    println!("skipped: the allocator tuning applies to glibc on Linux only");
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tuned_allocator_reuses_blocks_above_the_mmap_threshold() {
    /// Minor page faults of this process so far.
    fn minor_faults() -> i64 {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `getrusage` writes a `rusage` through the valid pointer it is given.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
        assert_eq!(rc, 0);
        // SAFETY: initialised by the successful call above.
        unsafe { usage.assume_init() }.ru_minflt
    }
    /// Allocates 96 MiB (three times the 32 MiB threshold), writes every page and frees it.
    fn touch_large_block() {
        let len = 96 << 20;
        let mut block: Vec<u8> = Vec::with_capacity(len);
        block.resize(len, 1);
        std::hint::black_box(&mut block);
    }
    if std::env::var(tessera_cpu::MALLOC_TUNING_ENV_VAR).is_ok_and(|v| v.trim() == "0") {
        println!("skipped: {} is 0", tessera_cpu::MALLOC_TUNING_ENV_VAR);
        return;
    }
    tessera_cpu::tune_allocator();
    touch_large_block();
    let before = minor_faults();
    touch_large_block();
    let faults = minor_faults() - before;
    // Fresh pages would take one fault per 4 KiB page (24,576), or per huge page where the
    // kernel backs the block with them; the reused block takes none.
    assert!(
        faults < 200,
        "{faults} minor page faults re-allocating a 96 MiB block"
    );
    println!("tuned allocator: {faults} minor page faults re-allocating a 96 MiB block: ok");
}
