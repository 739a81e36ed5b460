//! CPU lists as the kernel writes them (`local_cpulist`, `node*/cpulist`): `0-15,32-47`.
//!
//! nvidia-smi prints a GPU's CPU affinity in the same list form, so one parser and one
//! printer serve both sides.

use std::collections::BTreeSet;
use std::fmt;

/// A set of CPU numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSet(BTreeSet<u32>);

impl CpuSet {
    /// Parses a kernel CPU list (`0-3,8,10-11`); blanks around items are ignored and an
    /// empty string is the empty set. Anything else is an error naming the bad item.
    pub fn parse(s: &str) -> Result<CpuSet, String> {
        let mut set = BTreeSet::new();
        for item in s.trim().split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let num = |t: &str| t.trim().parse::<u32>().map_err(|_| format!("bad CPU list item {item:?} in {s:?}"));
            match item.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(format!("bad CPU range {item:?} in {s:?}"));
                    }
                    set.extend(a..=b);
                }
                None => {
                    set.insert(num(item)?);
                }
            }
        }
        Ok(CpuSet(set))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the two sets share a CPU.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.0.intersection(&other.0).next().is_some()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }
}

impl fmt::Display for CpuSet {
    /// The kernel's form: ascending ranges joined by commas (`0-55,112-167`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut it = self.0.iter().copied().peekable();
        let mut first = true;
        while let Some(start) = it.next() {
            let mut end = start;
            while it.peek() == Some(&(end + 1)) {
                end = it.next().unwrap_or(end);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_kernel_lists() {
        for s in ["0-15", "0-55,112-167", "3", "0,2,4-5", ""] {
            assert_eq!(CpuSet::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(CpuSet::parse("0-1,2-3\n").unwrap().to_string(), "0-3");
        assert!(CpuSet::parse("0-1,x").is_err());
        assert!(CpuSet::parse("5-2").is_err());
        let a = CpuSet::parse("0-15").unwrap();
        assert!(a.intersects(&CpuSet::parse("15-20").unwrap()));
        assert!(!a.intersects(&CpuSet::parse("16-20").unwrap()));
    }
}
