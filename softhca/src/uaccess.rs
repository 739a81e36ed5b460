//! copy_from_user / copy_to_user for an in-process device.
//!
//! softhca's kernel half receives the same raw addresses the kernel would: the ioctl
//! header, attribute pointers, response pointers, all chosen by the caller and possibly
//! wrong (the fuzz test sends random ones). The kernel answers a bad pointer with
//! EFAULT instead of crashing; so do we, by copying with `process_vm_readv` /
//! `process_vm_writev` on our own pid, which report an unmapped or read-only range as
//! EFAULT rather than faulting. Only the control path copies this way; the data path
//! works on registered memory the application promised to keep mapped.

use std::io::{IoSlice, IoSliceMut};

use nix::errno::Errno;
use nix::sys::uio::{process_vm_readv, process_vm_writev, RemoteIoVec};
use nix::unistd::Pid;
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// Copies `out.len()` bytes from user address `addr`.
pub fn copy_from_user(out: &mut [u8], addr: u64) -> Result<(), Errno> {
    if out.is_empty() {
        return Ok(());
    }
    let len = out.len();
    addr.checked_add(len as u64).ok_or(Errno::EFAULT)?;
    let remote = [RemoteIoVec { base: addr as usize, len }];
    match process_vm_readv(Pid::this(), &mut [IoSliceMut::new(out)], &remote) {
        Ok(n) if n == len => Ok(()),
        Ok(_) => Err(Errno::EFAULT),
        Err(Errno::ESRCH) | Err(Errno::EFAULT) | Err(Errno::EINVAL) => Err(Errno::EFAULT),
        Err(e) => Err(e),
    }
}

/// Copies `data` to user address `addr`.
pub fn copy_to_user(addr: u64, data: &[u8]) -> Result<(), Errno> {
    if data.is_empty() {
        return Ok(());
    }
    let len = data.len();
    addr.checked_add(len as u64).ok_or(Errno::EFAULT)?;
    let remote = [RemoteIoVec { base: addr as usize, len }];
    match process_vm_writev(Pid::this(), &[IoSlice::new(data)], &remote) {
        Ok(n) if n == len => Ok(()),
        Ok(_) => Err(Errno::EFAULT),
        Err(Errno::ESRCH) | Err(Errno::EFAULT) | Err(Errno::EINVAL) => Err(Errno::EFAULT),
        Err(e) => Err(e),
    }
}

/// Reads a `T` from user memory.
pub fn read_struct<T: FromBytes + IntoBytes>(addr: u64) -> Result<T, Errno> {
    let mut v = T::new_zeroed();
    copy_from_user(v.as_mut_bytes(), addr)?;
    Ok(v)
}

/// Writes a `T` to user memory.
pub fn write_struct<T: IntoBytes + Immutable>(addr: u64, v: &T) -> Result<(), Errno> {
    copy_to_user(addr, v.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_faults() {
        let src = [1u8, 2, 3, 4, 5];
        let mut dst = [0u8; 5];
        copy_from_user(&mut dst, src.as_ptr() as u64).unwrap();
        assert_eq!(dst, src);
        let mut target = [0u8; 3];
        copy_to_user(target.as_mut_ptr() as u64, &[9, 8, 7]).unwrap();
        assert_eq!(target, [9, 8, 7]);
        assert_eq!(copy_from_user(&mut dst, 8), Err(Errno::EFAULT));
        assert_eq!(copy_to_user(16, &[1]), Err(Errno::EFAULT));
        assert_eq!(copy_from_user(&mut dst, u64::MAX - 2), Err(Errno::EFAULT));
        // Read-only memory (a string literal in .rodata) cannot be written.
        let ro: &'static [u8] = b"read only";
        assert_eq!(copy_to_user(ro.as_ptr() as u64, b"x"), Err(Errno::EFAULT));
    }
}
