//! Protection domains: the scope within which MR keys and QPs may be used together.

use std::sync::Arc;

use uverbs::cmd::pd as pdcmd;
use uverbs::sys::mlx5::AllocPdResp;
use zerocopy::IntoBytes;

use crate::context::Context;
use crate::error::{Op, Result};

pub(crate) struct PdInner {
    pub(crate) ctx: Arc<Context>,
    pub(crate) handle: u32,
    pub(crate) pdn: u32,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        if let Err(e) = pdcmd::destroy_pd_ioctl(&self.ctx.dev, self.handle) {
            tracing::warn!(handle = self.handle, errno = %e, "dealloc_pd failed");
        }
    }
}

/// A protection domain. Cloning shares it; it is freed when the last user (clone, MR
/// or QP) goes away, so the device never sees it destroyed while in use.
#[derive(Clone)]
pub struct Pd {
    pub(crate) inner: Arc<PdInner>,
}

impl Context {
    /// `ibv_alloc_pd`.
    pub fn alloc_pd(self: &Arc<Self>) -> Result<Pd> {
        let _span = tracing::debug_span!("provider::alloc_pd").entered();
        let mut drv = AllocPdResp::default();
        let handle = pdcmd::alloc_pd(&self.dev, drv.as_mut_bytes()).op("alloc_pd")?;
        Ok(Pd { inner: Arc::new(PdInner { ctx: self.clone(), handle, pdn: drv.pdn }) })
    }
}

impl Pd {
    /// The device's PD number.
    pub fn pdn(&self) -> u32 {
        self.inner.pdn
    }

    /// The uverbs handle.
    pub fn handle(&self) -> u32 {
        self.inner.handle
    }

    /// The context.
    pub fn context(&self) -> &Arc<Context> {
        &self.inner.ctx
    }
}
