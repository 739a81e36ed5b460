//! 24-bit packet sequence numbers: arithmetic modulo 2^24 and "before/after" comparisons
//! inside a half-window of 2^23, as the IBA defines them for PSNs and MSNs.

/// The largest PSN.
pub const MASK: u32 = 0x00ff_ffff;

/// `a + n` modulo 2^24.
#[inline]
pub fn add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & MASK
}

/// `a - b` modulo 2^24, as a signed distance in `-2^23 .. 2^23`.
#[inline]
pub fn diff(a: u32, b: u32) -> i32 {
    let d = a.wrapping_sub(b) & MASK;
    if d & 0x0080_0000 != 0 {
        d as i32 - (1 << 24)
    } else {
        d as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps() {
        assert_eq!(add(MASK, 1), 0);
        assert_eq!(add(MASK - 1, 3), 1);
        assert_eq!(diff(1, MASK), 2);
        assert_eq!(diff(MASK, 1), -2);
        assert_eq!(diff(5, 5), 0);
        assert_eq!(diff(0x40_0000, 0), 0x40_0000);
        assert_eq!(diff(0, 0x40_0000), -0x40_0000);
    }
}
