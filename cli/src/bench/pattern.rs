//! `--check` data: a position-dependent byte pattern per end and QP, its complement as
//! "poison" for areas about to be written (so every byte a transfer fails to deliver is
//! caught), and the atomic counters' starting values.
//!
//! Buffers are memory the device writes behind the program's back; they are only
//! filled before a run and compared after it, when no transfer into them is in flight.

/// Which end wrote a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Client,
    Server,
}

impl End {
    fn seed(self) -> u32 {
        match self {
            End::Client => 0x3c,
            End::Server => 0xa7,
        }
    }
}

/// Byte `i` of the pattern `end` sends on QP `q`.
#[inline]
pub fn byte(end: End, q: usize, i: usize) -> u8 {
    let x = (i as u32) ^ ((i as u32) >> 8).wrapping_mul(0x9d) ^ ((i as u32) >> 16).wrapping_mul(0x3b);
    (x.wrapping_mul(31).wrapping_add(end.seed()).wrapping_add(q as u32 * 17)) as u8
}

/// Fills `len` bytes at `p` with `end`'s pattern for QP `q`.
///
/// # Safety
/// `[p, p + len)` must be writable and not concurrently written by the device.
pub unsafe fn fill(p: *mut u8, len: usize, end: End, q: usize) {
    // SAFETY: per the contract.
    let s = unsafe { std::slice::from_raw_parts_mut(p, len) };
    for (i, b) in s.iter_mut().enumerate() {
        *b = byte(end, q, i);
    }
}

/// Fills `len` bytes with the complement of `end`'s pattern: every byte differs from
/// what a correct transfer from `end` leaves there.
///
/// # Safety
/// As [`fill`].
pub unsafe fn poison(p: *mut u8, len: usize, end: End, q: usize) {
    // SAFETY: per the contract.
    let s = unsafe { std::slice::from_raw_parts_mut(p, len) };
    for (i, b) in s.iter_mut().enumerate() {
        *b = !byte(end, q, i);
    }
}

/// Compares `len` bytes at `p` with `end`'s pattern for QP `q`; describes the first
/// difference and counts them.
///
/// # Safety
/// `[p, p + len)` must be readable and not concurrently written by the device.
pub unsafe fn verify(p: *const u8, len: usize, end: End, q: usize) -> Result<(), String> {
    // SAFETY: per the contract.
    let s = unsafe { std::slice::from_raw_parts(p, len) };
    let mut first = None;
    let mut bad = 0usize;
    for (i, &b) in s.iter().enumerate() {
        let want = byte(end, q, i);
        if b != want {
            bad += 1;
            first.get_or_insert((i, b, want));
        }
    }
    match first {
        None => Ok(()),
        Some((i, got, want)) => Err(format!(
            "QP {q}: {bad} of {len} bytes differ; first at offset {i}: got {got:#04x}, expected {want:#04x}"
        )),
    }
}

/// The value the atomic counter of QP `q` starts at.
pub fn atomic_base(q: usize) -> u64 {
    0x0123_4567_0000_0000 ^ ((q as u64) << 48) ^ 0x00a5_0000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poison_differs_everywhere_and_ends_differ() {
        let mut v = vec![0u8; 70000];
        // SAFETY: `v` owns v.len() writable bytes.
        unsafe { poison(v.as_mut_ptr(), v.len(), End::Client, 1) };
        assert!(v.iter().enumerate().all(|(i, &b)| b != byte(End::Client, 1, i)));
        // SAFETY: as above.
        unsafe { fill(v.as_mut_ptr(), v.len(), End::Client, 1) };
        // SAFETY: `v` owns v.len() readable bytes.
        assert!(unsafe { verify(v.as_ptr(), v.len(), End::Client, 1) }.is_ok());
        // SAFETY: as above.
        assert!(unsafe { verify(v.as_ptr(), v.len(), End::Server, 1) }.is_err());
        // SAFETY: as above.
        assert!(unsafe { verify(v.as_ptr(), v.len(), End::Client, 2) }.is_err());
        // Not periodic at 256 or 4096: a misplaced page or packet is caught.
        assert!((0..4096).any(|i| byte(End::Client, 0, i) != byte(End::Client, 0, i + 4096)));
        assert!((0..256).any(|i| byte(End::Client, 0, i) != byte(End::Client, 0, i + 256)));
    }
}
