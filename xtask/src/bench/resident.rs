//! The resident memory of this process, from Linux's `/proc/self/status`: the current resident
//! set (`VmRSS`) and its peak (`VmHWM`), which `/proc/self/clear_refs` resets to the current
//! size so that the peak of one stretch of work can be read.

/// Resident set sizes in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resident {
    /// `VmRSS`: resident now.
    pub current: u64,
    /// `VmHWM`: the peak since the process started or the last [`reset_peak`].
    pub peak: u64,
}

/// Reads this process's resident set sizes; `None` where `/proc/self/status` has no such
/// lines (not Linux).
pub fn read() -> Option<Resident> {
    parse_status(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// Parses the `VmRSS` and `VmHWM` lines (in kB) of a `/proc/<pid>/status` text.
pub fn parse_status(status: &str) -> Option<Resident> {
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    };
    Some(Resident {
        current: field("VmRSS:")?,
        peak: field("VmHWM:")?,
    })
}

/// Resets the peak to the current resident size (`echo 5 > /proc/self/clear_refs`); false
/// where the kernel does not allow it, in which case the peak keeps counting from the start.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_parse_to_bytes() {
        let text = "Name:\ttessera\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t3\n";
        assert_eq!(
            parse_status(text),
            Some(Resident {
                current: 1024 * 1024,
                peak: 2048 * 1024
            })
        );
        assert_eq!(parse_status("Name:\tx\n"), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_has_a_resident_set_and_its_peak_is_at_least_that() {
        let r = read().expect("/proc/self/status on Linux");
        assert!(r.current > 0 && r.peak >= r.current, "{r:?}");
    }
}
