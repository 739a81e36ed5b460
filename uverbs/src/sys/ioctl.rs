//! `RDMA_VERBS_IOCTL`: one header, then `num_attrs` attributes (rdma_user_ioctl_cmds.h).
//!
//! The kernel reads `length` bytes from the ioctl argument, dispatches on
//! (object_id, method_id), and writes back into the attribute array: new object
//! handles and fds into `data`, and `UVERBS_ATTR_F_VALID_OUTPUT` into `flags` of every
//! output it filled.


abi_consts! {
    fn ioctl_consts;
    /// `_IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr)`.
    pub const RDMA_VERBS_IOCTL: u64 = 0xC018_1B01 => "RDMA_VERBS_IOCTL";
    pub const RDMA_IOCTL_MAGIC: u8 = 0x1b => "RDMA_IOCTL_MAGIC";
    /// The kernel must understand this attribute or fail the call.
    pub const UVERBS_ATTR_F_MANDATORY: u16 = 1 => "UVERBS_ATTR_F_MANDATORY";
    /// Set by the kernel on each output attribute it wrote.
    pub const UVERBS_ATTR_F_VALID_OUTPUT: u16 = 2 => "UVERBS_ATTR_F_VALID_OUTPUT";
}

abi_struct! {
    /// `struct ib_uverbs_ioctl_hdr` (24 bytes); the attributes follow it.
    pub struct IoctlHdr = "struct ib_uverbs_ioctl_hdr" {
        /// Total bytes: header plus `num_attrs * 16`.
        length: u16,
        object_id: u16,
        method_id: u16,
        num_attrs: u16,
        reserved1: u64,
        /// `enum rdma_driver_id` of the device; must match or the kernel says EINVAL.
        driver_id: u32,
        reserved2: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_attr` (16 bytes).
    pub struct IoctlAttr = "struct ib_uverbs_attr" {
        attr_id: u16,
        /// Length of the pointed-to (or inline) data; 0 for handles.
        len: u16,
        flags: u16,
        /// `attr_data.enum_data.elem_id` for enum attributes, else reserved.
        elem_id: u8 => "attr_data.enum_data.elem_id",
        elem_reserved: u8 => "attr_data.enum_data.reserved",
        /// A user pointer, inline data of at most 8 bytes, a handle or an fd.
        data: u64,
    }
}

/// Attribute data of at most this many bytes travels inline in `data`.
pub const INLINE_MAX: usize = 8;
