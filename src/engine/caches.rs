//! The row chains' tile sizes, from the L1 data cache's size the machine reports (Linux's
//! sysfs, read once), so that a machine with another L1 needs no re-tuning. Where it cannot be
//! read, the L1 of the machine they were measured on stands in (32 KiB: `docs/experiments.md`),
//! and there every size below is the one measured.

use std::sync::OnceLock;

/// The L1 data cache where none can be read.
const MEASURED_ON: usize = 32 << 10;

/// This machine's L1 data cache in bytes, read once.
fn l1() -> usize {
    static L1: OnceLock<usize> = OnceLock::new();
    *L1.get_or_init(|| read_sysfs().unwrap_or(MEASURED_ON))
}

/// The first CPU's level-1 data cache from `/sys/devices/system/cpu/cpu0/cache`; `None` where
/// that is not there (another OS, a container without it).
fn read_sysfs() -> Option<usize> {
    let dir = "/sys/devices/system/cpu/cpu0/cache";
    (0..8).find_map(|index| {
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/index{index}/{f}")).ok();
        let l1d = read("level")?.trim() == "1" && read("type")?.trim() == "Data";
        l1d.then(|| parse_size(&read("size")?))?
    })
}

/// `32K`, `1024K`, `32M` (sysfs' sizes) in bytes.
fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, unit) = match text.as_bytes().last()? {
        b'K' => (&text[..text.len() - 1], 1 << 10),
        b'M' => (&text[..text.len() - 1], 1 << 20),
        b'G' => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

/// A row chain's tile: rows taken together until the widest register holds half an L1.
pub(crate) fn row_tile() -> usize {
    l1() / 2
}

/// A chain's chunk of one row: an eighth of an L1 per register, so that a chain of a few
/// registers keeps them all in L1.
pub(crate) fn chunk() -> usize {
    l1() / 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_sizes_parse() {
        assert_eq!(parse_size("32K\n"), Some(32 << 10));
        assert_eq!(parse_size("1024K"), Some(1 << 20));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size(""), None);
    }

    /// This machine's L1 is read (or stands in) as a size in a cache's range.
    #[test]
    fn an_l1_size_is_read() {
        assert!((1 << 12..=1 << 22).contains(&l1()), "{}", l1());
        assert!(cat_l1().is_none_or(|size| size == l1()));
    }

    /// The L1d as `lscpu`-style sysfs reading by another route: index0 is L1d on x86 Linux.
    fn cat_l1() -> Option<usize> {
        let dir = "/sys/devices/system/cpu/cpu0/cache/index0";
        let kind = std::fs::read_to_string(format!("{dir}/type")).ok()?;
        (kind.trim() == "Data").then_some(())?;
        parse_size(&std::fs::read_to_string(format!("{dir}/size")).ok()?)
    }
}
