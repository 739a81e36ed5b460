//! DevX objects: firmware objects the kernel tracks for this context.

use prm::cmd::opcode;
use uverbs::cmd::devx as devxcmd;

use crate::context::DevxContext;
use crate::error::{check_out, opcode_of, trace_cmd, Error, Result};

/// A firmware object (CQ, QP, mkey, PD, ...) created with `mlx5dv_devx_obj_create`.
/// Dropping it runs the destroy command the kernel derived from the create inbox.
#[derive(Debug)]
pub struct Obj {
    devx: DevxContext,
    handle: u32,
    create_opcode: u16,
    id: u32,
    live: bool,
}

/// The new object's number in a create outbox: the 32-bit `obj_id` of the general
/// object commands, else the 24-bit number every other create answers at bit 0x48
/// (`cqn`, `qpn`, `mkey_index`, `pd`, `uar`...).
fn id_of(create_opcode: u16, out: &[u8]) -> u32 {
    if out.len() < 12 {
        return 0;
    }
    let dw2 = u32::from_be_bytes([out[8], out[9], out[10], out[11]]);
    if create_opcode == opcode::CREATE_GENERAL_OBJECT { dw2 } else { dw2 & 0xff_ffff }
}

impl DevxContext {
    /// Creates a firmware object from its create inbox; `out` receives the outbox
    /// (its length is the outbox length the kernel and firmware see).
    pub fn create_obj(&self, inbox: &[u8], out: &mut [u8]) -> Result<Obj> {
        let r = devxcmd::obj_create(self.device(), inbox, out)
            .map_err(|e| Error::from_call("devx obj_create", inbox, out, e))
            .and_then(|h| check_out("devx obj_create", inbox, out).map(|()| h))
            .map_err(|e| e.on(self.device()));
        trace_cmd("obj_create", inbox, out, &r);
        let handle = r?;
        let create_opcode = opcode_of(inbox);
        let id = id_of(create_opcode, out);
        tracing::debug!(target: "devx", opcode = format_args!("{create_opcode:#x}"), handle, id, "object created");
        Ok(Obj { devx: self.clone(), handle, create_opcode, id, live: true })
    }
}

impl Obj {
    pub(crate) fn device(&self) -> &uverbs::Device {
        self.devx.device()
    }

    /// The uverbs handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The firmware's number for it (CQN, QPN, mkey index, PD number...).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The opcode it was created with.
    pub fn create_opcode(&self) -> u16 {
        self.create_opcode
    }

    /// `mlx5dv_devx_obj_query`: a query command on this object.
    pub fn query(&self, inbox: &[u8], out: &mut [u8]) -> Result<()> {
        let r = devxcmd::obj_query(self.devx.device(), self.handle, inbox, out)
            .map_err(|e| Error::from_call("devx obj_query", inbox, out, e))
            .and_then(|()| check_out("devx obj_query", inbox, out))
            .map_err(|e| e.on(self.devx.device()));
        trace_cmd("obj_query", inbox, out, &r);
        r
    }

    /// `mlx5dv_devx_obj_modify`: a modify command (a QP transition...) on this object.
    pub fn modify(&self, inbox: &[u8], out: &mut [u8]) -> Result<()> {
        let r = devxcmd::obj_modify(self.devx.device(), self.handle, inbox, out)
            .map_err(|e| Error::from_call("devx obj_modify", inbox, out, e))
            .and_then(|()| check_out("devx obj_modify", inbox, out))
            .map_err(|e| e.on(self.devx.device()));
        trace_cmd("obj_modify", inbox, out, &r);
        r
    }

    /// Destroys the object now, returning the error a drop could only log: a CQ a
    /// QP still uses is refused, and the object comes back with the error, alive, to
    /// be destroyed later (or on drop).
    pub fn destroy(mut self) -> std::result::Result<(), (Obj, Error)> {
        match self.destroy_now() {
            Ok(()) => Ok(()),
            Err(e) => {
                self.live = true;
                Err((self, e))
            }
        }
    }

    fn destroy_now(&mut self) -> Result<()> {
        self.live = false;
        devxcmd::obj_destroy(self.devx.device(), self.handle)
            .map_err(|errno| Error::Os { op: "devx obj_destroy", errno })
    }
}

impl Drop for Obj {
    fn drop(&mut self) {
        if self.live {
            if let Err(e) = self.destroy_now() {
                tracing::warn!(target: "devx", handle = self.handle, id = self.id, error = %e, "destroying a DevX object failed");
            }
        }
    }
}

impl DevxContext {
    /// `mlx5dv_devx_qp_query`: a query command (QUERY_QP) on a QP made by
    /// `ibv_create_qp` (the provider's [`provider::Qp`]): DEVX_OBJ_QUERY accepts any
    /// uverbs object's handle, and a verbs QP is the same firmware object.
    pub fn query_verbs_qp(&self, qp: &provider::Qp, inbox: &[u8], out: &mut [u8]) -> Result<()> {
        let r = devxcmd::obj_query(self.device(), qp.handle(), inbox, out)
            .map_err(|e| Error::from_call("devx qp_query", inbox, out, e))
            .and_then(|()| check_out("devx qp_query", inbox, out))
            .map_err(|e| e.on(self.device()));
        trace_cmd("qp_query", inbox, out, &r);
        r
    }
}
