//! The DRM uapi this module uses, as the kernel defines it (include/uapi/drm/drm.h and
//! drm_mode.h; libdrm-dev installs them as /usr/include/libdrm/drm.h and drm_mode.h).
//!
//! Raw layouts only: the safe API is in [`super`]. `tests/vgem_layout.rs` compiles a C
//! program against the installed headers and compares every size, offset and ioctl
//! number here with theirs.

/// `DRM_IOCTL_BASE`: the ioctl type byte of every DRM ioctl.
pub const IOCTL_BASE: u8 = b'd';
/// Ioctl number of `DRM_IOCTL_VERSION` (`DRM_IOWR(0x00, struct drm_version)`).
pub const NR_VERSION: u8 = 0x00;
/// Ioctl number of `DRM_IOCTL_GEM_CLOSE` (`DRM_IOW(0x09, struct drm_gem_close)`).
pub const NR_GEM_CLOSE: u8 = 0x09;
/// Ioctl number of `DRM_IOCTL_PRIME_HANDLE_TO_FD` (`DRM_IOWR(0x2d, struct drm_prime_handle)`).
pub const NR_PRIME_HANDLE_TO_FD: u8 = 0x2d;
/// Ioctl number of `DRM_IOCTL_MODE_CREATE_DUMB` (`DRM_IOWR(0xB2, struct drm_mode_create_dumb)`).
pub const NR_MODE_CREATE_DUMB: u8 = 0xB2;

/// `DRM_CLOEXEC`: close-on-exec on the exported dma-buf fd (the value of `O_CLOEXEC`).
pub const CLOEXEC: u32 = libc::O_CLOEXEC as u32;
/// `DRM_RDWR`: the dma-buf fd is opened read-write, so it can be mapped `PROT_WRITE`
/// (the value of `O_RDWR`).
pub const RDWR: u32 = libc::O_RDWR as u32;

/// `struct drm_version`: the driver's version and the lengths (in) and text (out) of
/// its name, date and description. The caller supplies the text buffers.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DrmVersion {
    pub version_major: libc::c_int,
    pub version_minor: libc::c_int,
    pub version_patchlevel: libc::c_int,
    pub name_len: libc::size_t,
    pub name: *mut libc::c_char,
    pub date_len: libc::size_t,
    pub date: *mut libc::c_char,
    pub desc_len: libc::size_t,
    pub desc: *mut libc::c_char,
}

/// `struct drm_gem_close`: releases a GEM handle of this file.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct DrmGemClose {
    pub handle: u32,
    pub pad: u32,
}

/// `struct drm_prime_handle`: a GEM handle in, a dma-buf fd out (`flags`: [`CLOEXEC`],
/// [`RDWR`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct DrmPrimeHandle {
    pub handle: u32,
    pub flags: u32,
    pub fd: i32,
}

/// `struct drm_mode_create_dumb`: height, width, bpp and flags in; handle, pitch and
/// the object's size (whole pages) out.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct DrmModeCreateDumb {
    pub height: u32,
    pub width: u32,
    pub bpp: u32,
    pub flags: u32,
    pub handle: u32,
    pub pitch: u32,
    pub size: u64,
}

nix::ioctl_readwrite!(drm_version, IOCTL_BASE, NR_VERSION, DrmVersion);
nix::ioctl_write_ptr!(drm_gem_close, IOCTL_BASE, NR_GEM_CLOSE, DrmGemClose);
nix::ioctl_readwrite!(drm_prime_handle_to_fd, IOCTL_BASE, NR_PRIME_HANDLE_TO_FD, DrmPrimeHandle);
nix::ioctl_readwrite!(drm_mode_create_dumb, IOCTL_BASE, NR_MODE_CREATE_DUMB, DrmModeCreateDumb);

/// The full request numbers (`DRM_IOWR(nr, type)` and so on), as the C macros compute
/// them: what the layout test compares with the headers' `DRM_IOCTL_*`.
pub fn request_numbers() -> [(&'static str, u64); 4] {
    [
        ("DRM_IOCTL_VERSION", nix::request_code_readwrite!(IOCTL_BASE, NR_VERSION, std::mem::size_of::<DrmVersion>()) as u64),
        ("DRM_IOCTL_GEM_CLOSE", nix::request_code_write!(IOCTL_BASE, NR_GEM_CLOSE, std::mem::size_of::<DrmGemClose>()) as u64),
        ("DRM_IOCTL_PRIME_HANDLE_TO_FD",
         nix::request_code_readwrite!(IOCTL_BASE, NR_PRIME_HANDLE_TO_FD, std::mem::size_of::<DrmPrimeHandle>()) as u64),
        ("DRM_IOCTL_MODE_CREATE_DUMB",
         nix::request_code_readwrite!(IOCTL_BASE, NR_MODE_CREATE_DUMB, std::mem::size_of::<DrmModeCreateDumb>()) as u64),
    ]
}

/// One struct's layout: C name, size, and (field, offset, size) per field, for the
/// layout test.
pub type Layout = (&'static str, usize, Vec<(&'static str, usize, usize)>);

macro_rules! layout {
    ($c:literal, $t:ty, [$($f:ident),*]) => {
        ($c, std::mem::size_of::<$t>(),
         vec![$((stringify!($f), std::mem::offset_of!($t, $f), field_size(|v: &$t| &v.$f))),*])
    };
}

/// The size of the field `get` projects to.
fn field_size<T, F>(_get: fn(&T) -> &F) -> usize {
    std::mem::size_of::<F>()
}

/// Every struct of this module with its fields, for the layout test.
pub fn layouts() -> Vec<Layout> {
    vec![
        layout!("struct drm_version", DrmVersion,
                [version_major, version_minor, version_patchlevel, name_len, name, date_len, date, desc_len, desc]),
        layout!("struct drm_gem_close", DrmGemClose, [handle, pad]),
        layout!("struct drm_prime_handle", DrmPrimeHandle, [handle, flags, fd]),
        layout!("struct drm_mode_create_dumb", DrmModeCreateDumb, [height, width, bpp, flags, handle, pitch, size]),
    ]
}
