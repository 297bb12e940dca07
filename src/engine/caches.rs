//! The engine's tile sizes and thresholds, in one place, each from the cache sizes the machine
//! reports (Linux's sysfs, read once), so that a machine with other caches needs no re-tuning.
//! Where the sizes cannot be read, the figures of the machine they were measured on stand in
//! (32 KiB of L1d, 1 MiB of L2, 32 MiB of L3: `docs/experiments.md`), and there every size below is
//! the one measured. (The chains' sizes are those of programs, feature `stablehlo`.)

use std::sync::OnceLock;

/// The data caches' sizes in bytes: L1d, L2 and the last level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caches {
    pub l1: usize,
    pub l2: usize,
    pub l3: usize,
}

/// The sizes where none can be read.
const MEASURED_ON: Caches = Caches {
    l1: 32 << 10,
    l2: 1 << 20,
    l3: 32 << 20,
};

/// This machine's caches, read once.
pub(crate) fn caches() -> Caches {
    static CACHES: OnceLock<Caches> = OnceLock::new();
    *CACHES.get_or_init(|| read_sysfs().unwrap_or(MEASURED_ON))
}

/// The first CPU's data and unified caches from `/sys/devices/system/cpu/cpu0/cache`; `None`
/// where that is not there (another OS, a container without it) or is incomplete.
fn read_sysfs() -> Option<Caches> {
    let dir = "/sys/devices/system/cpu/cpu0/cache";
    let mut found = [None; 3];
    for index in 0..8 {
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/index{index}/{f}")).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        let level: usize = level.trim().parse().ok()?;
        if kind.trim() != "Instruction" && (1..=3).contains(&level) {
            found[level - 1] = Some(parse_size(&size)?);
        }
    }
    let [Some(l1), Some(l2), l3] = found else {
        return None;
    };
    // A machine without an L3 streams past its L2.
    Some(Caches {
        l1,
        l2,
        l3: l3.unwrap_or(l2),
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

impl Caches {
    /// A row chain's tile: rows taken together until the widest register holds half an L1.
    pub fn row_tile(self) -> usize {
        self.l1 / 2
    }

    /// A chain's chunk of one row: an eighth of an L1 per register, so that a chain of a
    /// few registers keeps them all in L1.
    pub fn chunk(self) -> usize {
        self.l1 / 8
    }
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

    /// On the caches they were measured on, the sizes are the measured ones.
    #[test]
    fn the_measured_sizes_stand_where_none_are_read() {
        let c = MEASURED_ON;
        let sizes = [c.row_tile(), c.chunk()];
        assert_eq!(sizes, [16 << 10, 4 << 10]);
        let here = caches();
        assert!(
            here.l1 > 0 && here.l2 >= here.l1 && here.l3 >= here.l2,
            "{here:?}"
        );
    }
}
