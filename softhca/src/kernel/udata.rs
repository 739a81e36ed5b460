//! User buffers as the kernel sees them: input that is either inline in an ioctl
//! attribute or behind a user pointer, and output behind a user pointer. Every access is
//! a checked copy ([`crate::uaccess`]): a bad pointer is EFAULT, never a crash.

use nix::errno::Errno;
use zerocopy::{FromBytes, IntoBytes};

use crate::uaccess::{copy_from_user, copy_to_user};

use super::Result;

/// The top of the user address space on x86-64 (`TASK_SIZE_MAX`): `access_ok` fails for
/// ranges reaching above it.
pub(crate) const TASK_SIZE: u64 = 0x0000_7fff_ffff_f000;

/// The kernel's `access_ok(addr, len)`: the range lies below [`TASK_SIZE`].
pub(crate) fn access_ok(addr: u64, len: u64) -> bool {
    match addr.checked_add(len) {
        Some(end) => end <= TASK_SIZE,
        None => false,
    }
}

/// Input bytes of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InBuf {
    /// Carried in the ioctl attribute itself (at most 8 bytes).
    Inline { bytes: [u8; 8], len: usize },
    /// In user memory.
    User { addr: u64, len: usize },
}

impl Default for InBuf {
    fn default() -> InBuf {
        InBuf::User { addr: 0, len: 0 }
    }
}

impl InBuf {
    /// No input.
    pub(crate) fn empty() -> InBuf {
        InBuf::default()
    }

    pub(crate) fn len(&self) -> usize {
        match *self {
            InBuf::Inline { len, .. } | InBuf::User { len, .. } => len,
        }
    }

    /// Copies `out.len()` bytes from offset `off`; EFAULT past the end or on a fault.
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) -> Result<()> {
        let end = off.checked_add(out.len()).ok_or(Errno::EFAULT)?;
        match *self {
            InBuf::Inline { bytes, len } => {
                let src = bytes.get(off..end).filter(|_| end <= len).ok_or(Errno::EFAULT)?;
                out.copy_from_slice(src);
                Ok(())
            }
            // Reading past `len` is allowed: like the kernel, it reads the caller's memory.
            InBuf::User { addr, .. } => copy_from_user(out, addr.checked_add(off as u64).ok_or(Errno::EFAULT)?),
        }
    }

    /// Reads a `T` from the first `min(len, size_of T)` bytes, zero-extending the rest
    /// (`ib_copy_from_udata` of a possibly shorter struct).
    pub(crate) fn read_prefix<T: FromBytes + IntoBytes>(&self) -> Result<T> {
        let mut v = T::new_zeroed();
        let n = self.len().min(std::mem::size_of::<T>());
        self.read(0, &mut v.as_mut_bytes()[..n])?;
        Ok(v)
    }

    /// Whether every byte from `from` to the end is zero; a fault counts as "not zero"
    /// (`ib_is_buffer_cleared`).
    pub(crate) fn is_cleared(&self, from: usize) -> bool {
        let len = self.len();
        if from >= len {
            return true;
        }
        let mut chunk = [0u8; 256];
        let mut off = from;
        while off < len {
            let n = (len - off).min(chunk.len());
            if self.read(off, &mut chunk[..n]).is_err() || chunk[..n].iter().any(|b| *b != 0) {
                return false;
            }
            off += n;
        }
        true
    }

    /// `uverbs_request`: copies the request struct, zero-extends a short one and requires
    /// the bytes past a long one to be zero (EOPNOTSUPP otherwise).
    pub(crate) fn request<T: FromBytes + IntoBytes>(&self) -> Result<T> {
        let v = self.read_prefix::<T>()?;
        if self.len() > std::mem::size_of::<T>() && !self.is_cleared(std::mem::size_of::<T>()) {
            return Err(Errno::EOPNOTSUPP);
        }
        Ok(v)
    }
}

/// Where an output lives; for ioctl attributes also where to set `VALID_OUTPUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct OutBuf {
    pub addr: u64,
    pub len: usize,
    /// `(address of the attribute's flags word in the user's array, flags value)`: the
    /// kernel writes `flags | UVERBS_ATTR_F_VALID_OUTPUT` there after filling the output.
    pub valid_flag: Option<(u64, u16)>,
}

impl OutBuf {
    pub(crate) fn user(addr: u64, len: usize) -> OutBuf {
        OutBuf { addr, len, valid_flag: None }
    }

    /// Marks the output written (ioctl attributes only).
    pub(crate) fn set_valid(&self) -> Result<()> {
        if let Some((addr, flags)) = self.valid_flag {
            let f = flags | uverbs::sys::ioctl::UVERBS_ATTR_F_VALID_OUTPUT;
            copy_to_user(addr, &f.to_ne_bytes())?;
        }
        Ok(())
    }

    /// `uverbs_copy_to`: writes `min(len, data.len())` bytes and marks the output.
    pub(crate) fn copy_to(&self, data: &[u8]) -> Result<()> {
        let n = self.len.min(data.len());
        copy_to_user(self.addr, &data[..n])?;
        self.set_valid()
    }

    /// `uverbs_copy_to_struct_or_zero`: zero-fills the part of the buffer past `data`,
    /// then writes like [`OutBuf::copy_to`].
    pub(crate) fn copy_to_struct_or_zero(&self, data: &[u8]) -> Result<()> {
        if data.len() < self.len {
            clear_user(self.addr.checked_add(data.len() as u64).ok_or(Errno::EFAULT)?, self.len - data.len())?;
        }
        self.copy_to(data)
    }

    /// The write() response: `min(len, data.len())` bytes, then zeros for the rest of the
    /// buffer (`uverbs_response` without a CORE_OUT attribute).
    pub(crate) fn response(&self, data: &[u8]) -> Result<()> {
        let n = self.len.min(data.len());
        copy_to_user(self.addr, &data[..n])?;
        if data.len() < self.len {
            clear_user(self.addr.checked_add(data.len() as u64).ok_or(Errno::EFAULT)?, self.len - data.len())?;
        }
        Ok(())
    }
}

/// Writes `len` zero bytes at `addr`.
pub(crate) fn clear_user(addr: u64, len: usize) -> Result<()> {
    let zeros = [0u8; 512];
    let mut off = 0usize;
    while off < len {
        let n = (len - off).min(zeros.len());
        copy_to_user(addr.checked_add(off as u64).ok_or(Errno::EFAULT)?, &zeros[..n])?;
        off += n;
    }
    Ok(())
}

/// Driver data of a command (`struct ib_udata`): mlx5's request and response structs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Udata {
    pub inp: InBuf,
    pub out: OutBuf,
}

impl Udata {
    /// `ib_copy_to_udata`: writes all of `data` at the output pointer, whatever the
    /// output length (the kernel does not clamp). EFAULT when there is no buffer.
    pub(crate) fn copy_to(&self, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        copy_to_user(self.out.addr, data)
    }

}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_user_input() {
        let i = InBuf::Inline { bytes: [1, 2, 3, 4, 0, 0, 0, 0], len: 4 };
        let mut b = [0u8; 2];
        i.read(2, &mut b).unwrap();
        assert_eq!(b, [3, 4]);
        assert_eq!(i.read(3, &mut b), Err(Errno::EFAULT));
        let v: u64 = i.read_prefix().unwrap();
        assert_eq!(v, 0x0403_0201);
        let data = [5u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
        let u = InBuf::User { addr: data.as_ptr() as u64, len: data.len() };
        assert!(!u.is_cleared(8));
        assert!(u.is_cleared(11));
        assert_eq!(u.request::<u64>(), Err(Errno::EOPNOTSUPP));
        let short = InBuf::User { addr: data.as_ptr() as u64, len: 2 };
        assert_eq!(short.request::<u64>(), Ok(5));
        let bad = InBuf::User { addr: 8, len: 16 };
        assert_eq!(bad.request::<u64>(), Err(Errno::EFAULT));
        assert!(!bad.is_cleared(0));
    }

    #[test]
    fn outputs_truncate_and_zero_fill() {
        let mut buf = [0xaau8; 8];
        let o = OutBuf::user(buf.as_mut_ptr() as u64, 6);
        o.response(&[1, 2, 3]).unwrap();
        assert_eq!(buf, [1, 2, 3, 0, 0, 0, 0xaa, 0xaa]);
        let mut flags = [1u16];
        let o = OutBuf { addr: buf.as_mut_ptr() as u64, len: 2, valid_flag: Some((flags.as_mut_ptr() as u64, 1)) };
        o.copy_to(&[9, 9, 9]).unwrap();
        assert_eq!(&buf[..3], &[9, 9, 3]);
        assert_eq!(flags[0], 3);
        assert!(access_ok(0x1000, 0x1000));
        assert!(!access_ok(TASK_SIZE, 1));
        assert!(!access_ok(u64::MAX, 2));
    }
}
