//! Building and running one `RDMA_VERBS_IOCTL` call.
//!
//! [`Ioctl`] lays out the header and attributes in one contiguous buffer, exactly as
//! the kernel reads them. Input attributes of at most 8 bytes travel inline in the
//! attribute's `data` word; larger ones and all outputs are pointers into memory that
//! the builder borrows for `'a`, so the borrow checker guarantees every pointer the
//! device writes through is alive and exclusively ours for the call.

use std::marker::PhantomData;

use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::device::Device;
use crate::sys::{ids, names};
use crate::sys::ioctl::{INLINE_MAX, UVERBS_ATTR_F_MANDATORY, UVERBS_ATTR_F_VALID_OUTPUT};
use crate::sys::{IoctlAttr, IoctlHdr};
use crate::Result;

/// The most attributes one call carries; the largest method (QP create) has 15.
pub const MAX_ATTRS: usize = 20;

#[repr(C)]
#[derive(Clone, Copy, IntoBytes, Immutable)]
struct Buf {
    hdr: IoctlHdr,
    attrs: [IoctlAttr; MAX_ATTRS],
}

/// Index of an attribute in a built call, to read back what the device wrote there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttrIdx(usize);

/// One ioctl call under construction; `'a` is the lifetime of the buffers it points at.
pub struct Ioctl<'a> {
    buf: Buf,
    _borrows: PhantomData<&'a mut [u8]>,
}

impl<'a> Ioctl<'a> {
    /// A call of `method` on `object`. The driver id is filled in by [`Ioctl::run`].
    pub fn new(object: u16, method: u16) -> Self {
        let hdr = IoctlHdr { object_id: object, method_id: method, ..Default::default() };
        Ioctl { buf: Buf { hdr, attrs: [IoctlAttr::default(); MAX_ATTRS] }, _borrows: PhantomData }
    }

    fn push(&mut self, attr: IoctlAttr) -> AttrIdx {
        let n = self.buf.hdr.num_attrs as usize;
        assert!(n < MAX_ATTRS, "too many ioctl attributes");
        self.buf.attrs[n] = attr;
        self.buf.hdr.num_attrs += 1;
        self.buf.hdr.length = (std::mem::size_of::<IoctlHdr>() + (n + 1) * std::mem::size_of::<IoctlAttr>()) as u16;
        AttrIdx(n)
    }

    fn attr(id: u16, len: usize, data: u64) -> IoctlAttr {
        IoctlAttr { attr_id: id, len: len as u16, flags: UVERBS_ATTR_F_MANDATORY, data, ..Default::default() }
    }

    /// Input bytes (PTR_IN): inline when at most 8 bytes, else a pointer.
    pub fn in_bytes(&mut self, id: u16, bytes: &'a [u8]) -> AttrIdx {
        let data = if bytes.len() <= INLINE_MAX {
            let mut w = [0u8; 8];
            w[..bytes.len()].copy_from_slice(bytes);
            u64::from_ne_bytes(w)
        } else {
            bytes.as_ptr() as u64
        };
        self.push(Self::attr(id, bytes.len(), data))
    }

    /// Input struct (PTR_IN).
    pub fn in_struct<T: IntoBytes + Immutable>(&mut self, id: u16, v: &'a T) -> AttrIdx {
        self.in_bytes(id, v.as_bytes())
    }

    /// Small input value carried inline (a PTR_IN of `size_of::<T>()` bytes, or a
    /// CONST_IN): copied now, so no borrow is needed.
    pub fn in_value<T: IntoBytes + Immutable>(&mut self, id: u16, v: T) -> AttrIdx {
        let b = v.as_bytes();
        assert!(b.len() <= INLINE_MAX, "in_value is for inline data");
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        self.push(Self::attr(id, b.len(), u64::from_ne_bytes(w)))
    }

    /// A CONST_IN attribute: the kernel accepts only an 8-byte inline value, whatever
    /// the constant's type (`uverbs_get_const` then range-checks it).
    pub fn in_const(&mut self, id: u16, value: u64) -> AttrIdx {
        self.push(Self::attr(id, 8, value))
    }

    /// Enum input: `elem` selects the variant, `bytes` its data.
    pub fn in_enum(&mut self, id: u16, elem: u8, bytes: &'a [u8]) -> AttrIdx {
        let i = self.in_bytes(id, bytes);
        self.buf.attrs[i.0].elem_id = elem;
        i
    }

    /// Output bytes (PTR_OUT): the device writes at most `out.len()` bytes.
    pub fn out_bytes(&mut self, id: u16, out: &'a mut [u8]) -> AttrIdx {
        self.push(Self::attr(id, out.len(), out.as_mut_ptr() as u64))
    }

    /// Output struct (PTR_OUT).
    pub fn out_struct<T: FromBytes + IntoBytes>(&mut self, id: u16, out: &'a mut T) -> AttrIdx {
        self.out_bytes(id, out.as_mut_bytes())
    }

    /// An existing object's handle (IDR).
    pub fn handle(&mut self, id: u16, handle: u32) -> AttrIdx {
        self.push(Self::attr(id, 0, handle as u64))
    }

    /// A new object (IDR, NEW access): the device writes its handle back.
    pub fn new_handle(&mut self, id: u16) -> AttrIdx {
        self.push(Self::attr(id, 0, 0))
    }

    /// An existing file descriptor (FD).
    pub fn fd(&mut self, id: u16, fd: i32) -> AttrIdx {
        self.push(Self::attr(id, 0, fd as i64 as u64))
    }

    /// A new file descriptor (FD, NEW access): the device writes the fd back.
    pub fn new_fd(&mut self, id: u16) -> AttrIdx {
        self.push(Self::attr(id, 0, 0))
    }

    /// Clears MANDATORY on an attribute: a device that does not know it ignores it.
    pub fn optional(&mut self, i: AttrIdx) {
        self.buf.attrs[i.0].flags &= !UVERBS_ATTR_F_MANDATORY;
    }

    /// The handle the device wrote into a [`Ioctl::new_handle`] attribute.
    pub fn handle_out(&self, i: AttrIdx) -> u32 {
        self.buf.attrs[i.0].data as u32
    }

    /// The fd the device wrote into a [`Ioctl::new_fd`] attribute.
    pub fn fd_out(&self, i: AttrIdx) -> i32 {
        self.buf.attrs[i.0].data as i64 as i32
    }

    /// Whether the device marked an output attribute as written.
    pub fn valid_output(&self, i: AttrIdx) -> bool {
        self.buf.attrs[i.0].flags & UVERBS_ATTR_F_VALID_OUTPUT != 0
    }

    /// The header, for tests that corrupt it on purpose.
    pub fn hdr_mut(&mut self) -> &mut IoctlHdr {
        &mut self.buf.hdr
    }

    /// An attribute, for tests that corrupt it on purpose.
    pub fn attr_mut(&mut self, i: AttrIdx) -> &mut IoctlAttr {
        &mut self.buf.attrs[i.0]
    }

    /// The bytes the device will read: header and attributes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf.as_bytes()[..self.buf.hdr.length.max(24) as usize]
    }

    /// `OBJECT.METHOD`, or `INVOKE_WRITE(COMMAND)` for a legacy command carried by ioctl.
    fn what(&self) -> String {
        let (o, m) = (self.buf.hdr.object_id, self.buf.hdr.method_id);
        if o == ids::object::DEVICE && m == ids::device::INVOKE_WRITE {
            let attrs = &self.buf.attrs[..self.buf.hdr.num_attrs as usize];
            if let Some(c) = attrs.iter().find(|a| a.attr_id == ids::device::ATTR_WRITE_CMD) {
                return format!("INVOKE_WRITE({})", names::write_cmd_name(c.data as u32));
            }
        }
        format!("{}.{}", names::object_name(o), names::method_name(o, m))
    }

    /// The attributes' names in call order (`HANDLE,PD,SEND_CQ,...`).
    fn attr_names(&self) -> String {
        let (o, m) = (self.buf.hdr.object_id, self.buf.hdr.method_id);
        let attrs = &self.buf.attrs[..self.buf.hdr.num_attrs as usize];
        attrs.iter().map(|a| names::attr_name(o, m, a.attr_id)).collect::<Vec<_>>().join(",")
    }

    /// Runs the call on `dev` with the device's driver id.
    pub fn run(&mut self, dev: &Device) -> Result<()> {
        self.buf.hdr.driver_id = dev.driver_id();
        if self.buf.hdr.length == 0 {
            self.buf.hdr.length = std::mem::size_of::<IoctlHdr>() as u16;
        }
        // Names, not ids (`ioctl QP.CREATE`), the way the preload library decodes a stock
        // program's calls, so both kinds of trace read alike; built only when recorded.
        tracing::trace!(target: "uverbs::ioctl", attrs = %self.attr_names(), "ioctl {}", self.what());
        // SAFETY: the buffer holds `length` bytes of header and attributes; every
        // pointer attribute was made from a slice borrowed for 'a with its exact
        // length and direction (shared for inputs, exclusive for outputs), and 'a
        // outlives this call.
        let r = unsafe { dev.ioctl_raw(&mut self.buf.hdr) };
        if let Err(e) = r {
            tracing::debug!(target: "uverbs::ioctl", errno = %e, "ioctl {} failed", self.what());
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_of_a_built_call() {
        let mut port = crate::sys::verbs::QueryPortRespEx::default();
        let mut c = Ioctl::new(0, 2);
        c.in_const(0, 1);
        c.out_struct(1, &mut port);
        let b = c.as_bytes().to_vec();
        assert_eq!(b.len(), 24 + 2 * 16);
        // header: length 56, object 0, method 2, num_attrs 2
        assert_eq!(&b[0..8], &[56, 0, 0, 0, 2, 0, 2, 0]);
        // attr 0: id 0, len 8 (CONST_IN), flags MANDATORY, data inline 0x01
        assert_eq!(&b[24..40], &[0, 0, 8, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        // attr 1: id 1, len 48, flags MANDATORY, data = pointer
        assert_eq!(&b[40..46], &[1, 0, 48, 0, 1, 0]);
        assert_eq!(u64::from_ne_bytes(b[48..56].try_into().unwrap()), &port as *const _ as u64);
    }

    #[test]
    fn inline_limit_is_eight_bytes() {
        let eight = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let nine = [9u8; 9];
        let mut c = Ioctl::new(1, 0);
        let a = c.in_bytes(0, &eight);
        let b = c.in_bytes(1, &nine);
        assert_eq!(c.buf.attrs[a.0].data, u64::from_ne_bytes(eight));
        assert_eq!(c.buf.attrs[b.0].data, nine.as_ptr() as u64);
        c.optional(b);
        assert_eq!(c.buf.attrs[b.0].flags, 0);
    }
}
