//! # softhca: a software RDMA HCA that behaves like a ConnectX-5
//!
//! softhca runs inside the process that uses it. A provider (doorbell's own, or stock
//! libmlx5 through an LD_PRELOAD shim) hands it exactly the bytes and raw user addresses
//! the kernel would get on `/dev/infiniband/uverbsN`, and it answers with the same bytes,
//! the same errnos and the same memory effects. Like the real thing it has two halves:
//!
//! - **The kernel half** ([`kernel`]) is `ib_uverbs` + `mlx5_ib`: it decodes ioctl and
//!   write() commands, keeps each file's objects with the kernel's lifetime rules, runs
//!   the QP state machine, answers libmlx5's GET_CONTEXT and serves mmap of UAR and clock
//!   pages. Open a file with [`Hca::open`]; it implements [`uverbs::Endpoint`].
//! - **The device half** ([`device`]) is the ConnectX: it watches doorbells, executes
//!   work requests, speaks RoCEv2 ([`wire`]) over the UDP socket of the instance and
//!   writes CQEs. The kernel half tells it about object changes through [`device::Device`].
//!
//! Where things are:
//! - [`config`]: an instance's address (127.0.0.N by default), identity and GID table.
//! - [`firmware`]: the PRM command interface (QUERY_HCA_CAP, UCTX, UMEM, PD, UAR, CQ,
//!   QP with its state machine, MKEY) on firmware objects per HCA. Its CQs and QPs are
//!   the ones the device half runs; the kernel half's DevX (`kernel/methods/devx.rs`)
//!   executes userspace mailboxes here, and the verbs' ALLOC_PD, CREATE_CQ, CREATE_QP,
//!   transitions and destroys are these same commands (as mlx5_ib's), so a verbs QP
//!   and a DevX QP are the same firmware object.
//! - [`hca`]: one instance ([`Hca`]): device-wide QPN/CQN/MKey tables and number
//!   allocators shared by both halves.
//! - [`objects`]: the HCA's view of PDs, MRs, CQs, QPs, AHs, UAR pages and event fds.
//! - [`pages`]: the shared-memory pages behind UAR and clock mmaps.
//! - [`peer`]: MR memory the device reaches through its exporter (GPU memory behind a
//!   dma-buf the CPU cannot map), served by resolvers such as `gdr`'s.
//! - [`kernel`]: `ioctl.rs` (attribute decoding), `write.rs` (write() decoding),
//!   `uobject.rs` (handles), `methods/` (one file per object), `qp_state.rs`,
//!   `mlx5.rs` (the driver's part), `mmap.rs`.
//! - [`uaccess`]: checked copies to and from user addresses.
//! - [`wire`]: RoCEv2 packet formats.
//!
//! What a ConnectX-5 supports but softhca does not (it answers like a device without the
//! capability, or EOPNOTSUPP where the kernel would run the command): OPEN_QP (XRC
//! domains, XRC SRQs and XRC QPs are implemented), DC, memory
//! windows, tag-matching SRQs (basic SRQs are implemented), WQs, flow actions (flows are implemented:
//! docs/steering.md, as are raw packet QPs), device memory, counters objects,
//! multicast attach, REREG_MR, RESIZE_CQ, CQ moderation, ADVISE_MR, on-demand
//! paging, CQE compression and 128-byte CQE padding; of DevX, general objects, DevX
//! mkeys over UMEMs, and DEVX_SUBSCRIBE_EVENT with its event fd (DevX CQs are polled).

pub mod config;
pub mod device;
pub mod firmware;
pub mod hca;
pub mod kernel;
pub mod objects;
pub mod pages;
pub mod peer;
pub mod uaccess;
pub mod wire;

use std::io;
use std::sync::{Arc, Mutex};

pub use config::Config;
pub use hca::{Access, Hca, KeyError};
pub use kernel::File;

/// The process-wide instance, created on first use.
static DEFAULT: Mutex<Option<Arc<Hca>>> = Mutex::new(None);

/// The process's default HCA: created on first use at the default address (see
/// [`config`]) and shared by every later caller. A failed creation is retried next time.
pub fn default_hca() -> io::Result<Arc<Hca>> {
    let mut slot = DEFAULT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = slot.as_ref() {
        return Ok(h.clone());
    }
    let h = Hca::new_default()?;
    *slot = Some(h.clone());
    Ok(h)
}

/// The board id a ConnectX reports in sysfs (`board_id`); softhca's is fixed. The
/// preload shim writes it into the generated sysfs tree and `doorbell devinfo` prints it.
pub const BOARD_ID: &str = "MT_0000000010";
