//! The data caches of the CPU this process runs on, read once at run time (Linux: sysfs), so
//! that cache-blocked kernels size their blocks for this machine rather than for the one they
//! were tuned on.

use std::path::Path;
use std::sync::OnceLock;

/// The bytes of each data cache level one core can count on: its own L1d and L2, and its
/// share of the L3 (the L3's size over the CPUs that share it). `None` where the level is
/// absent or could not be read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CacheSizes {
    /// Level-1 data cache.
    pub(crate) l1d: Option<usize>,
    /// Level-2 cache.
    pub(crate) l2: Option<usize>,
    /// This core's share of the level-3 cache.
    pub(crate) l3_share: Option<usize>,
}

/// One cache as sysfs lists it (`/sys/devices/system/cpu/cpu0/cache/index*/`): the contents
/// of its `level`, `type`, `size` and `shared_cpu_list` files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CacheEntry {
    pub(crate) level: String,
    pub(crate) kind: String,
    pub(crate) size: String,
    pub(crate) shared_cpu_list: String,
}

impl CacheSizes {
    /// This machine's caches, read once (all `None` where sysfs is not there to read, and
    /// under Miri, whose isolation forbids reading files).
    pub(crate) fn of_this_machine() -> CacheSizes {
        static SIZES: OnceLock<CacheSizes> = OnceLock::new();
        *SIZES.get_or_init(|| {
            if cfg!(miri) {
                return CacheSizes::default();
            }
            CacheSizes::from_entries(&read_entries(Path::new(
                "/sys/devices/system/cpu/cpu0/cache",
            )))
        })
    }

    /// The sizes the entries describe: data and unified caches only (an instruction cache
    /// is not where operands are blocked).
    pub(crate) fn from_entries(entries: &[CacheEntry]) -> CacheSizes {
        let mut sizes = CacheSizes::default();
        for entry in entries {
            let kind = entry.kind.trim();
            if kind != "Data" && kind != "Unified" {
                continue;
            }
            let Some(bytes) = parse_size(&entry.size) else {
                continue;
            };
            match entry.level.trim() {
                "1" => sizes.l1d = Some(bytes),
                "2" => sizes.l2 = Some(bytes),
                "3" => {
                    let sharing = count_cpus(&entry.shared_cpu_list).unwrap_or(1).max(1);
                    sizes.l3_share = Some(bytes / sharing);
                }
                _ => {}
            }
        }
        sizes
    }
}

/// The entries of a sysfs cache folder (`index0`, `index1`, ...); none if it cannot be read.
fn read_entries(folder: &Path) -> Vec<CacheEntry> {
    let Ok(dir) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let read =
        |path: &Path, file: &str| std::fs::read_to_string(path.join(file)).unwrap_or_default();
    let mut entries: Vec<CacheEntry> = dir
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .map(|e| {
            let path = e.path();
            CacheEntry {
                level: read(&path, "level"),
                kind: read(&path, "type"),
                size: read(&path, "size"),
                shared_cpu_list: read(&path, "shared_cpu_list"),
            }
        })
        .collect();
    entries.sort_by(|a, b| a.level.cmp(&b.level));
    entries
}

/// A sysfs cache size (`"32K"`, `"1024K"`, `"32M"`, or plain bytes) in bytes.
pub(crate) fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let value: usize = digits.parse().ok()?;
    let scale = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return None,
    };
    value.checked_mul(scale).filter(|&b| b > 0)
}

/// The CPUs in a sysfs CPU list (`"0-3,8-11"`, `"5"`).
pub(crate) fn count_cpus(list: &str) -> Option<usize> {
    let mut count = 0usize;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        count += match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi): (usize, usize) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
                hi.checked_sub(lo)? + 1
            }
            None => {
                part.trim().parse::<usize>().ok()?;
                1
            }
        };
    }
    (count > 0).then_some(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(level: &str, kind: &str, size: &str, shared: &str) -> CacheEntry {
        CacheEntry {
            level: format!("{level}\n"),
            kind: format!("{kind}\n"),
            size: format!("{size}\n"),
            shared_cpu_list: format!("{shared}\n"),
        }
    }

    #[test]
    fn sizes_in_sysfs_units_parse_to_bytes() {
        assert_eq!(parse_size("32K\n"), Some(32 * 1024));
        assert_eq!(parse_size("1024K"), Some(1 << 20));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("65536"), Some(65536));
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("0K"), None);
        assert_eq!(parse_size("12Q"), None);
    }

    #[test]
    fn cpu_lists_count_ranges_and_singles() {
        assert_eq!(count_cpus("0-1\n"), Some(2));
        assert_eq!(count_cpus("0-3,8-11"), Some(8));
        assert_eq!(count_cpus("5"), Some(1));
        assert_eq!(count_cpus(""), None);
        assert_eq!(count_cpus("3-1"), None);
    }

    #[test]
    fn a_zen3_listing_gives_its_data_caches_and_the_l3_share() {
        // What a 2-vCPU AMD EPYC (Zen 3) virtual machine lists.
        let entries = [
            entry("1", "Data", "32K", "0"),
            entry("1", "Instruction", "32K", "0"),
            entry("2", "Unified", "512K", "0"),
            entry("3", "Unified", "32768K", "0-1"),
        ];
        let sizes = CacheSizes::from_entries(&entries);
        assert_eq!(
            sizes,
            CacheSizes {
                l1d: Some(32 << 10),
                l2: Some(512 << 10),
                l3_share: Some(16 << 20),
            }
        );
    }

    #[test]
    fn missing_or_unreadable_levels_stay_unknown() {
        let entries = [
            entry("1", "Data", "48K", "0"),
            entry("2", "Unified", "?", "0"),
        ];
        let sizes = CacheSizes::from_entries(&entries);
        assert_eq!(sizes.l1d, Some(48 << 10));
        assert_eq!(sizes.l2, None);
        assert_eq!(sizes.l3_share, None);
        assert_eq!(CacheSizes::from_entries(&[]), CacheSizes::default());
    }

    #[test]
    fn this_machine_reads_without_panicking() {
        let sizes = CacheSizes::of_this_machine();
        if let Some(l1d) = sizes.l1d {
            assert!(l1d >= 4 << 10, "an L1d of {l1d} bytes");
        }
    }
}
