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
    /// The traffic from which a walk's outputs go past the cache with non-temporal stores:
    /// half again the last level, so that what is written next is not what was just written.
    pub fn stream_min(self) -> usize {
        self.l3 + self.l3 / 2
    }

    /// The traffic from which a chain asks for its next tile ahead: more than a core's caches
    /// hold, so its inputs come from memory.
    #[cfg(feature = "stablehlo")]
    pub fn prefetch_min(self) -> usize {
        4 * self.l2
    }

    /// A row chain's tile: rows taken together until the widest register holds half an L1.
    #[cfg(feature = "stablehlo")]
    pub fn row_tile(self) -> usize {
        self.l1 / 2
    }

    /// A chain's chunk of one row: an eighth of an L1 per register, so that a chain of a
    /// few registers keeps them all in L1.
    #[cfg(feature = "stablehlo")]
    pub fn chunk(self) -> usize {
        self.l1 / 8
    }

    /// A chain's tile that reads an input across its rows: an L1 of the widest register.
    #[cfg(feature = "stablehlo")]
    pub fn across_tile(self) -> usize {
        self.l1
    }

    /// A column chain's band of rows: an L1 of the widest full register.
    #[cfg(feature = "stablehlo")]
    pub fn band(self) -> usize {
        self.l1
    }

    /// A column chain's row in a band: longer rows are cut in pieces of half an L1.
    #[cfg(feature = "stablehlo")]
    pub fn band_row(self) -> usize {
        self.l1 / 2
    }

    /// A column chain's tile of every row: an L2 of the widest full register.
    #[cfg(feature = "stablehlo")]
    pub fn column_tile(self) -> usize {
        self.l2
    }

    /// The traffic from which a column chain that keeps a register in its output sweeps its
    /// rows: more than the last level holds.
    #[cfg(feature = "stablehlo")]
    pub fn sweep_min(self) -> usize {
        self.l3
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
    #[cfg(feature = "stablehlo")]
    fn the_measured_sizes_stand_where_none_are_read() {
        let c = MEASURED_ON;
        let sizes = [c.stream_min(), c.prefetch_min(), c.row_tile(), c.chunk()];
        assert_eq!(sizes, [48 << 20, 4 << 20, 16 << 10, 4 << 10]);
        let columns = [c.band(), c.band_row(), c.column_tile(), c.sweep_min()];
        assert_eq!(columns, [32 << 10, 16 << 10, 1 << 20, 32 << 20]);
        assert_eq!(c.across_tile(), 32 << 10);
        let here = caches();
        assert!(
            here.l1 > 0 && here.l2 >= here.l1 && here.l3 >= here.l2,
            "{here:?}"
        );
    }
}
