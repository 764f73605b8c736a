//! Counters of what a device did: host synchronisations, buffer creations and reuses, kernel
//! launches and BLAS calls. Tests read them to prove that a chain of ops never waits for the
//! device and that steady-state work allocates nothing.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a device's counters (cumulative since the device was first opened in this
/// process; every handle on one device shares them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Times the host waited for the device: read-backs and synchronisations.
    pub host_syncs: u64,
    /// Device allocations made ([`crate::Driver::allocate`]: requests the pool could not serve).
    pub buffers_created: u64,
    /// Requests served from the buffer pool without a device allocation.
    pub buffers_reused: u64,
    /// Kernels launched.
    pub kernel_launches: u64,
    /// Vendor BLAS GEMM calls ([`crate::Driver::blas_gemm`]).
    pub blas_calls: u64,
    /// Kernel modules compiled or loaded (as the driver counts them).
    pub modules_built: u64,
}

/// The live counters behind [`RuntimeStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    host_syncs: AtomicU64,
    buffers_created: AtomicU64,
    buffers_reused: AtomicU64,
    kernel_launches: AtomicU64,
    blas_calls: AtomicU64,
}

impl Counters {
    pub(crate) fn host_sync(&self) {
        self.host_syncs.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn buffer(&self, reused: bool) {
        let counter = if reused {
            &self.buffers_reused
        } else {
            &self.buffers_created
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn kernel_launched(&self) {
        self.kernel_launches.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn blas_called(&self) {
        self.blas_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// The current values; `modules_built` comes from the driver.
    pub(crate) fn snapshot(&self, modules_built: u64) -> RuntimeStats {
        RuntimeStats {
            host_syncs: self.host_syncs.load(Ordering::Relaxed),
            buffers_created: self.buffers_created.load(Ordering::Relaxed),
            buffers_reused: self.buffers_reused.load(Ordering::Relaxed),
            kernel_launches: self.kernel_launches.load(Ordering::Relaxed),
            blas_calls: self.blas_calls.load(Ordering::Relaxed),
            modules_built,
        }
    }
}
