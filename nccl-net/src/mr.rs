//! Memory handles: a registration on the device of the comm it was made for.

use provider::Mr;

/// What regMr hands NCCL (through [`crate::live`]).
pub struct MrHandle {
    pub mr: Mr,
    /// The device index, so that a handle is only used on comms of its device.
    pub dev: usize,
}

// SAFETY: an Mr is a handle number and keys; destroying it is an ioctl on the
// device's fd, which may come from any thread.
unsafe impl Send for MrHandle {}
// SAFETY: as above; nothing in it is mutated after creation.
unsafe impl Sync for MrHandle {}
