//! The kernels queued since the last synchronisation, so that an error raised asynchronously
//! (an illegal address, a launch failure) names the op that may have caused it.

use tessera_core::{DType, Error};

/// Distinct kernels remembered between two synchronisations (the most recent ones).
const REMEMBERED: usize = 8;

/// Environment variable: `1` makes every launch wait for the device, so that an asynchronous
/// error names exactly the kernel that raised it (like `CUDA_LAUNCH_BLOCKING`).
pub const LAUNCH_BLOCKING_ENV_VAR: &str = "TESSERA_LAUNCH_BLOCKING";

/// Kernels queued since the last synchronisation, oldest first.
#[derive(Debug, Default)]
pub(crate) struct LaunchLog {
    kernels: Vec<(&'static str, DType)>,
    dropped: usize,
}

impl LaunchLog {
    /// Records a launch (a repeat of the previous kernel is recorded once).
    pub(crate) fn record(&mut self, kernel: &'static str, dtype: DType) {
        if self.kernels.last() == Some(&(kernel, dtype)) {
            return;
        }
        if self.kernels.len() == REMEMBERED {
            self.kernels.remove(0);
            self.dropped += 1;
        }
        self.kernels.push((kernel, dtype));
    }

    /// Forgets everything (after a successful synchronisation).
    pub(crate) fn clear(&mut self) {
        self.kernels.clear();
        self.dropped = 0;
    }

    /// The error a failed synchronisation reports: a driver error becomes a
    /// [`Error::Backend`] whose `op` is the last kernel queued and whose message lists the
    /// kernels that may have raised it. Other errors pass unchanged. Clears the log.
    pub(crate) fn attribute(&mut self, error: Error) -> Error {
        let Error::Backend { backend, op, msg } = error else {
            self.clear();
            return error;
        };
        let Some(&(last, _)) = self.kernels.last() else {
            return Error::Backend { backend, op, msg };
        };
        let mut queued: Vec<String> = self
            .kernels
            .iter()
            .map(|(k, dtype)| format!("{k} ({dtype})"))
            .collect();
        if self.dropped > 0 {
            queued.insert(0, format!("{} earlier", self.dropped));
        }
        let msg = if self.kernels.len() == 1 && self.dropped == 0 {
            format!("{msg} (raised asynchronously by kernel {})", queued[0])
        } else {
            format!(
                "{msg} (raised asynchronously by one of the kernels queued since the last \
                 synchronisation, oldest first: {}; set {LAUNCH_BLOCKING_ENV_VAR}=1 to wait \
                 after every launch and name it exactly)",
                queued.join(", ")
            )
        };
        self.clear();
        Error::Backend {
            backend,
            op: last,
            msg,
        }
    }
}

impl LaunchLog {
    /// The error a failed launch of `kernel` reports: the driver may be returning an error left
    /// by queued work, so a non-empty log is listed after the message. Clears the log.
    pub(crate) fn attribute_launch(&mut self, kernel: &'static str, error: Error) -> Error {
        let Error::Backend { backend, op, msg } = error else {
            self.clear();
            return error;
        };
        if self.kernels.is_empty() {
            return Error::Backend { backend, op, msg };
        }
        let queued: Vec<String> = self
            .kernels
            .iter()
            .map(|(k, dtype)| format!("{k} ({dtype})"))
            .collect();
        self.clear();
        Error::Backend {
            backend,
            op: kernel,
            msg: format!(
                "{msg} (at the launch of {kernel}; the error may have been raised asynchronously \
                 by a kernel queued since the last synchronisation: {})",
                queued.join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver_error() -> Error {
        Error::Backend {
            backend: "cuda",
            op: "synchronize",
            msg: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        }
    }

    #[test]
    fn a_single_queued_kernel_is_named_as_the_culprit() {
        let mut log = LaunchLog::default();
        log.record("gather", DType::F32);
        log.record("gather", DType::F32);
        let err = log.attribute(driver_error());
        let Error::Backend { op, msg, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*op, "gather");
        assert!(
            msg.contains("raised asynchronously by kernel gather (f32)"),
            "{msg}"
        );
        assert!(log.kernels.is_empty());
    }

    #[test]
    fn several_kernels_are_listed_oldest_first_with_the_last_as_op() {
        let mut log = LaunchLog::default();
        for k in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"] {
            log.record(k, DType::I64);
        }
        let err = log.attribute(driver_error());
        let Error::Backend { op, msg, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*op, "j");
        assert!(msg.contains("2 earlier, c (i64), d (i64)"), "{msg}");
        assert!(msg.contains(LAUNCH_BLOCKING_ENV_VAR), "{msg}");
    }

    #[test]
    fn a_failed_launch_lists_the_kernels_queued_before_it() {
        let mut log = LaunchLog::default();
        let err = log.attribute_launch("copy", driver_error());
        assert_eq!(
            err,
            driver_error(),
            "nothing queued: the error is the launch's own"
        );
        log.record("gemm", DType::F32);
        let err = log.attribute_launch("copy", driver_error());
        let Error::Backend { op, msg, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*op, "copy");
        assert!(
            msg.contains("queued since the last synchronisation: gemm (f32)"),
            "{msg}"
        );
    }

    #[test]
    fn typed_errors_pass_unchanged() {
        let mut log = LaunchLog::default();
        log.record("gather", DType::F32);
        let oom = Error::OutOfMemory {
            device: "cuda:0".into(),
            requested_bytes: 8,
        };
        assert_eq!(log.attribute(oom.clone()), oom);
    }
}
