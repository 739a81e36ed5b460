//! The DevX context: a provider context the device granted DevX to.

use std::sync::Arc;

use provider::Context;
use uverbs::cmd::devx as devxcmd;
use uverbs::Device;

use crate::error::{check_out, trace_cmd, Error, Result};

/// A device context with DevX: every command it sends carries its uid, and every
/// object it creates is its own. Cloning shares it.
#[derive(Clone, Debug)]
pub struct DevxContext {
    ctx: Arc<Context>,
}

impl DevxContext {
    /// DevX on an open provider context; [`Error::NotGranted`] when the device refused
    /// the DEVX flag (the provider then opened without it, as libmlx5 does).
    pub fn new(ctx: Arc<Context>) -> Result<DevxContext> {
        if !ctx.devx_granted() {
            return Err(Error::NotGranted);
        }
        Ok(DevxContext { ctx })
    }

    /// Opens a device by name (`None`: the embedded softhca) and takes DevX on it.
    pub fn open(name: Option<&str>) -> Result<DevxContext> {
        DevxContext::new(Context::open(name)?)
    }

    /// The provider context (for verbs objects beside the DevX ones: a PD, an MR).
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The uverbs device.
    pub fn device(&self) -> &Device {
        self.ctx.device()
    }

    /// `mlx5dv_devx_general_cmd`: a command that creates no object (QUERY_HCA_CAP,
    /// QUERY_QP by number...). `out` must be as long as the command's outbox; a
    /// firmware failure is [`Error::Firmware`], with the outbox left in `out`.
    pub fn general_cmd(&self, inbox: &[u8], out: &mut [u8]) -> Result<()> {
        let r = devxcmd::general_cmd(self.device(), inbox, out)
            .map_err(|e| Error::from_call("devx general command", inbox, out, e))
            .and_then(|()| check_out("devx general command", inbox, out))
            .map_err(|e| e.on(self.device()));
        trace_cmd("general", inbox, out, &r);
        r
    }

    /// `mlx5dv_devx_query_eqn`: the EQ number for `cqc.c_eqn` of completion vector
    /// `vector`.
    pub fn query_eqn(&self, vector: u32) -> Result<u32> {
        devxcmd::query_eqn(self.device(), vector).map_err(|errno| Error::Os { op: "devx query_eqn", errno })
    }

    /// `MLX5_IB_METHOD_DEVX_QUERY_UAR`: the device index of the context's bfreg
    /// `user_idx` (for contexts with static UARs).
    pub fn query_uar(&self, user_idx: u32) -> Result<u32> {
        devxcmd::query_uar(self.device(), user_idx).map_err(|errno| Error::Os { op: "devx query_uar", errno })
    }
}
