//! Encoding the legacy and extended write() commands.
//!
//! The response travels through a pointer inside the command, so the encoder owns a
//! response buffer (core response followed by driver response, contiguous as the
//! kernel writes them) and copies it out to the caller's typed structs afterwards.

use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::device::Device;
use crate::sys::write::{CMD_FLAG_EXTENDED};
use crate::sys::{names, CmdHdr, ExCmdHdr};
use crate::Result;

/// One write() command: core input/output and driver (udata) input/output.
///
/// For legacy commands whose core struct begins with the `response` pointer,
/// `core_in` must include those 8 bytes (their value is replaced); extended commands
/// carry the pointer in [`ExCmdHdr`] instead, so `core_in` starts with the body.
pub struct WriteCmd<'a> {
    pub command: u32,
    pub core_in: &'a [u8],
    pub drv_in: &'a [u8],
    pub core_out: &'a mut [u8],
    pub drv_out: &'a mut [u8],
}

impl<'a> WriteCmd<'a> {
    /// A command with a core input and output and no driver data.
    pub fn new(command: u32, core_in: &'a [u8], core_out: &'a mut [u8]) -> Self {
        WriteCmd { command, core_in, drv_in: &[], core_out, drv_out: &mut [] }
    }

    /// Adds driver data.
    pub fn udata(mut self, drv_in: &'a [u8], drv_out: &'a mut [u8]) -> Self {
        self.drv_in = drv_in;
        self.drv_out = drv_out;
        self
    }

    /// The legacy encoding: `in_words` and `out_words` count 4-byte words, the input
    /// count including the 8-byte header. `resp` is the response buffer's address.
    pub fn encode_legacy(&self, resp: u64) -> Vec<u8> {
        let in_len = std::mem::size_of::<CmdHdr>() + self.core_in.len() + self.drv_in.len();
        let out_len = self.core_out.len() + self.drv_out.len();
        let hdr = CmdHdr { command: self.command, in_words: (in_len / 4) as u16, out_words: (out_len / 4) as u16 };
        let mut v = Vec::with_capacity(in_len);
        v.extend_from_slice(hdr.as_bytes());
        v.extend_from_slice(self.core_in);
        if out_len > 0 && self.core_in.len() >= 8 {
            v[8..16].copy_from_slice(&resp.to_ne_bytes());
        }
        v.extend_from_slice(self.drv_in);
        v
    }

    /// The extended encoding: sizes in 8-byte words, excluding both headers; the
    /// driver sizes are rounded up to whole words.
    pub fn encode_ex(&self, resp: u64) -> Vec<u8> {
        let words = |n: usize| n.div_ceil(8) as u16;
        let hdr = CmdHdr {
            command: self.command | CMD_FLAG_EXTENDED,
            in_words: words(self.core_in.len()),
            out_words: words(self.core_out.len()),
        };
        let ex = ExCmdHdr {
            response: if self.core_out.is_empty() && self.drv_out.is_empty() { 0 } else { resp },
            provider_in_words: words(self.drv_in.len()),
            provider_out_words: words(self.drv_out.len()),
            cmd_hdr_reserved: 0,
        };
        let mut v = Vec::new();
        v.extend_from_slice(hdr.as_bytes());
        v.extend_from_slice(ex.as_bytes());
        v.extend_from_slice(self.core_in);
        v.resize(v.len() + (hdr.in_words as usize * 8 - self.core_in.len()), 0);
        v.extend_from_slice(self.drv_in);
        v.resize(v.len() + (ex.provider_in_words as usize * 8 - self.drv_in.len()), 0);
        v
    }

    fn run(&mut self, dev: &Device, extended: bool) -> Result<()> {
        // Core and driver responses are contiguous for the device; extended commands
        // place the driver response right after the word-rounded core response.
        let core_room = if extended { self.core_out.len().div_ceil(8) * 8 } else { self.core_out.len() };
        let drv_room = if extended { self.drv_out.len().div_ceil(8) * 8 } else { self.drv_out.len() };
        let mut resp = vec![0u8; core_room + drv_room];
        let bytes = if extended { self.encode_ex(resp.as_mut_ptr() as u64) }
                    else { self.encode_legacy(resp.as_mut_ptr() as u64) };
        // The command's name (`EX_` for an extended one), as the preload library decodes it.
        let name = || names::write_cmd_name(self.command | if extended { CMD_FLAG_EXTENDED } else { 0 });
        tracing::trace!(target: "uverbs::write", len = bytes.len(), "write {}", name());
        // SAFETY: the response pointer inside `bytes` is `resp`, which is alive, ours,
        // and as large as the header announces.
        let r = unsafe { dev.write_raw(&bytes) };
        match r {
            Ok(_) => {
                let n = self.core_out.len();
                self.core_out.copy_from_slice(&resp[..n]);
                let m = self.drv_out.len();
                self.drv_out.copy_from_slice(&resp[core_room..core_room + m]);
                Ok(())
            }
            Err(e) => {
                tracing::debug!(target: "uverbs::write", errno = %e, "write {} failed", name());
                Err(e)
            }
        }
    }

    /// Runs the command through the ioctl `UVERBS_METHOD_INVOKE_WRITE`, as rdma-core
    /// does for legacy commands when the ioctl path works: the core structs travel as
    /// CORE_IN/CORE_OUT attributes (the `response` word in CORE_IN is ignored), the
    /// driver data as UHW_IN/UHW_OUT, and bit 31 of the command selects an extended one.
    pub fn run_invoke(&mut self, dev: &Device) -> Result<()> {
        use crate::sys::ids::{device, object, UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT};
        let mut c = crate::ioctl::Ioctl::new(object::DEVICE, device::INVOKE_WRITE);
        c.in_const(device::ATTR_WRITE_CMD, self.command as u64);
        c.in_bytes(device::ATTR_CORE_IN, self.core_in);
        if !self.core_out.is_empty() {
            c.out_bytes(device::ATTR_CORE_OUT, self.core_out);
        }
        if !self.drv_in.is_empty() {
            c.in_bytes(UVERBS_ATTR_UHW_IN, self.drv_in);
        }
        if !self.drv_out.is_empty() {
            c.out_bytes(UVERBS_ATTR_UHW_OUT, self.drv_out);
        }
        c.run(dev)
    }

    /// Runs the command as a legacy write().
    pub fn run_legacy(&mut self, dev: &Device) -> Result<()> {
        self.run(dev, false)
    }

    /// Runs the command as an extended write().
    pub fn run_ex(&mut self, dev: &Device) -> Result<()> {
        self.run(dev, true)
    }
}

/// A typed legacy command: `core_in` with its response pointer first, a typed response.
pub fn legacy<I, O>(dev: &Device, command: u32, core_in: &I, drv_in: &[u8], drv_out: &mut [u8]) -> Result<O>
where
    I: IntoBytes + Immutable,
    O: FromBytes + IntoBytes + Default,
{
    let mut out = O::default();
    WriteCmd::new(command, core_in.as_bytes(), out.as_mut_bytes()).udata(drv_in, drv_out).run_legacy(dev)?;
    Ok(out)
}

/// A legacy command with no response (DEALLOC_PD, DEREG_MR).
pub fn legacy_no_resp<I: IntoBytes + Immutable>(dev: &Device, command: u32, core_in: &I) -> Result<()> {
    WriteCmd::new(command, core_in.as_bytes(), &mut []).run_legacy(dev)
}

/// A typed extended command.
pub fn extended<I, O>(dev: &Device, command: u32, core_in: &I, drv_in: &[u8], drv_out: &mut [u8]) -> Result<O>
where
    I: IntoBytes + Immutable,
    O: FromBytes + IntoBytes + Default,
{
    let mut out = O::default();
    WriteCmd::new(command, core_in.as_bytes(), out.as_mut_bytes()).udata(drv_in, drv_out).run_ex(dev)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::verbs::{AllocPd, DeallocPd};
    use crate::sys::write::{CMD_ALLOC_PD, CMD_DEALLOC_PD, EX_CMD_QUERY_DEVICE};

    #[test]
    fn legacy_alloc_pd_bytes() {
        let cmd = AllocPd::default();
        let mut out = [0u8; 4];
        let mut drv = [0u8; 4];
        let w = WriteCmd::new(CMD_ALLOC_PD, cmd.as_bytes(), &mut out).udata(&[], &mut drv);
        let b = w.encode_legacy(0x1122_3344_5566_7788);
        // command 3, in_words (8 + 8) / 4 = 4, out_words (4 + 4) / 4 = 2
        assert_eq!(b, [3, 0, 0, 0, 4, 0, 2, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
    }

    #[test]
    fn legacy_without_response() {
        let cmd = DeallocPd { pd_handle: 7 };
        let w = WriteCmd::new(CMD_DEALLOC_PD, cmd.as_bytes(), &mut []);
        assert_eq!(w.encode_legacy(0xdead), [4, 0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0]);
    }

    #[test]
    fn extended_query_device_bytes() {
        let body = crate::sys::verbs::ExQueryDevice::default();
        let mut out = [0u8; 232];
        let w = WriteCmd::new(EX_CMD_QUERY_DEVICE, body.as_bytes(), &mut out);
        let b = w.encode_ex(0x10);
        assert_eq!(&b[0..8], &[1, 0, 0, 0x80, 1, 0, 29, 0]);
        assert_eq!(&b[8..24], &[0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(b.len(), 32);
    }
}
