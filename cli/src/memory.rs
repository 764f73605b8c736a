//! What a run reports about its memory: the process's peak resident set and peak address space,
//! and the largest of the ranks' figures.

use tessera_core::{Backend, Result, Tensor};
use tessera_nn::distributed::{Communicator, Reduction};

/// The process's peak resident set size in bytes (`VmHWM` of `/proc/self/status`), or 0 where
/// the system does not report it.
pub fn peak_rss_bytes() -> u64 {
    status_bytes("VmHWM:")
}

/// The process's peak address space in bytes (`VmPeak` of `/proc/self/status`: what `ulimit -v`
/// limits), or 0 where the system does not report it.
pub fn peak_virtual_bytes() -> u64 {
    status_bytes("VmPeak:")
}

/// A `kB` figure of `/proc/self/status` in bytes, or 0.
fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                let kib = line.strip_prefix(field)?.trim().strip_suffix("kB")?;
                kib.trim().parse::<u64>().ok()
            })
        })
        .map_or(0, |kib| kib * 1024)
}

/// Bytes of the tensors' elements.
pub fn tensor_bytes<'a, B: Backend + 'a>(
    tensors: impl IntoIterator<Item = &'a Tensor<B>>,
) -> usize {
    tensors
        .into_iter()
        .map(|t| t.numel() * t.dtype().size_in_bytes())
        .sum()
}

/// The largest of every rank's `values`, element by element (a collective).
pub fn max_over_ranks<B: Backend>(comm: &dyn Communicator<B>, values: &mut [f64]) -> Result<()> {
    if comm.world_size() > 1 {
        comm.all_reduce_host(values, Reduction::Max)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_resident_set_is_at_least_what_was_touched() {
        let before = peak_rss_bytes();
        let touched = vec![1u8; 64 << 20];
        let after = peak_rss_bytes();
        assert!(touched.iter().map(|&b| b as u64).sum::<u64>() == 64 << 20);
        if before > 0 {
            assert!(after >= 64 << 20, "VmHWM {after} after touching 64 MiB");
        }
    }

    #[test]
    fn the_peak_address_space_covers_the_resident_set() {
        let reserved = vec![0u8; 32 << 20];
        let (virt, rss) = (peak_virtual_bytes(), peak_rss_bytes());
        assert_eq!(reserved.len(), 32 << 20);
        if rss > 0 {
            assert!(virt >= rss, "VmPeak {virt} below VmHWM {rss}");
            assert!(virt >= 32 << 20, "VmPeak {virt} with 32 MiB allocated");
        }
    }
}
