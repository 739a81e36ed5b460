//! mlx5_ib's part of the kernel: the user context, the capabilities a ConnectX-5 reports,
//! and the driver data of CREATE_CQ / CREATE_QP / MODIFY_QP / QUERY_DEVICE.
//!
//! The capability values are those of a typical ConnectX-5 with RoCE, except where
//! softhca deliberately reports a feature as absent because it does not implement it:
//! XRC and DC, memory windows, on-demand
//! paging, CQE compression and 128-byte CQE padding, raw packet QPs and their offloads,
//! SRQs and tag matching, device memory.

use std::collections::BTreeMap;
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::mlx5::{
    AllocUcontextReqV2, AllocUcontextResp, QueryDeviceResp as Mlx5QueryDeviceResp, ALLOC_UCTX_DEVX,
    CMDS_SUPP_UHW_CREATE_AH, CMDS_SUPP_UHW_QUERY_DEVICE, LIB_CAP_DYN_UAR, QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT,
    RESP_MASK_CORE_CLOCK_OFFSET, RESP_MASK_DUMP_FILL_MKEY,
};
use uverbs::sys::verbs::{ExQueryDeviceResp, QueryDeviceResp};

use crate::hca::Hca;
use crate::objects::{Kind, Live, UarKind, UarObj};

use super::udata::Udata;
use super::Result;

/// ConnectX-5 capabilities (`MLX5_CAP_GEN` and friends), as logarithms where the
/// firmware reports them so.
pub(crate) mod caps {
    pub const LOG_MAX_QP: u32 = 18;
    pub const LOG_MAX_QP_SZ: u32 = 15;
    pub const LOG_MAX_SRQ_SZ: u32 = 15;
    pub const LOG_MAX_SRQ: u32 = 23;
    pub const LOG_MAX_CQ_SZ: u32 = 22;
    pub const LOG_MAX_CQ: u32 = 24;
    pub const LOG_MAX_MKEY: u32 = 24;
    pub const LOG_MAX_PD: u32 = 24;
    pub const LOG_MAX_MSG: u32 = 30;
    pub const LOG_MAX_MCG: u32 = 21;
    pub const MAX_QP_MCG: u32 = 240;
    pub const LOG_BF_REG_SIZE: u32 = 9;
    pub const MAX_WQE_SZ_SQ: u32 = 1024;
    pub const MAX_WQE_SZ_RQ: u32 = 512;
    /// Outstanding RDMA READ/atomic as responder (`log_max_ra_req_qp`) and requester.
    pub const LOG_MAX_RA_REQ_QP: u32 = 4;
    pub const LOG_MAX_RA_RES_QP: u32 = 4;
    /// `mlx5_to_sw_pkey_sz(0)`: the P_Key table size the device reports on Ethernet.
    pub const PKEY_TABLE_LEN: u32 = 128;
    pub const CQE_VERSION: u8 = 1;
    pub const LOCAL_CA_ACK_DELAY: u8 = 16;
    /// `roce_address_table_size` is in `Config::gid_tbl_len`; this is the GID table the
    /// port reports as the P_Key table length on RoCE.
    pub const PORT_PKEY_TBL_LEN: u16 = 1;
    /// `MLX5_MAX_SGE_RD`.
    pub const MAX_SGE_RD: u32 = 30;
    /// `MLX5_MAX_BFREGS`.
    pub const MAX_BFREGS: u32 = 512;
    /// `MLX5_MAX_DYN_BFREGS` with 4 KiB pages.
    pub const MAX_DYN_BFREGS: u32 = 1024;
}

/// Bfregs of one UAR that the driver hands out (`MLX5_NON_FP_BFREGS_PER_UAR`).
pub(crate) const NON_FP_BFREGS_PER_UAR: u32 = 2;
/// Bfregs per UAR in libmlx5's numbering (`MLX5_BFREGS_PER_UAR`).
const BFREGS_PER_UAR: u32 = 4;
/// The bfreg index reported when the QP names its UAR itself (`MLX5_IB_INVALID_BFREG`).
pub(crate) const INVALID_BFREG: u32 = 1 << 31;
/// The user index of a QP in a context with CQE version 0 (`MLX5_IB_DEFAULT_UIDX`).
pub(crate) const DEFAULT_UIDX: u32 = 0xff_ffff;
/// First mmap entry of dynamic UARs: command 9, index 0 (`MLX5_IB_MMAP_OFFSET_START`).
pub(crate) const MMAP_OFFSET_START: u32 = 9 << 16;
pub(crate) const MMAP_OFFSET_END: u32 = (255 << 16) | 0xffff;

/// `enum ib_uverbs_device_cap_flags` bits reported.
pub(crate) const DEVICE_CAP_FLAGS: u64 = (1 << 1) // BAD_PKEY_CNTR
    | (1 << 2) // BAD_QKEY_CNTR
    | (1 << 5) // CHANGE_PHY_PORT
    | (1 << 10) // PORT_ACTIVE_EVENT
    | (1 << 11) // SYS_IMAGE_GUID
    | (1 << 12) // RC_RNR_NAK_GEN
    | (1 << 20) // XRC (mlx5_ib: the xrc capability)
    | (1 << 21) // MEM_MGT_EXTENSIONS
    | (1 << 36); // PCI_WRITE_END_PADDING

/// The static UARs and bfregs of a context opened without dynamic UARs
/// (`struct mlx5_bfreg_info`).
#[derive(Debug)]
pub(crate) struct StaticUars {
    /// Request version: 0 for the 8-byte v1 request, 2 otherwise.
    pub ver: u8,
    /// Static bfregs plus the slots of legacy dynamic ones.
    pub total_num_bfregs: u32,
    pub num_low_latency_bfregs: u32,
    pub num_static_sys_pages: u32,
    pub num_dyn_bfregs: u32,
    pub num_sys_pages: u32,
    /// Every system page: the static ones first, then those mmap(ALLOC_WC) allocated.
    pub sys_pages: Vec<Option<Arc<UarObj>>>,
    /// QPs per bfreg.
    pub count: Vec<u32>,
}

impl StaticUars {
    fn max_bfregs(&self) -> u32 {
        self.num_static_sys_pages * NON_FP_BFREGS_PER_UAR
    }

    fn num_med(&self) -> u32 {
        self.max_bfregs().saturating_sub(self.num_low_latency_bfregs + 1)
    }

    /// `alloc_bfreg`: a free low-latency bfreg, else the least used medium one, else the
    /// shared bfreg 0.
    pub(crate) fn alloc_bfreg(&mut self) -> u32 {
        let mut found = None;
        if self.ver >= 2 {
            let first_hi = self.num_med() + 1;
            found = (first_hi..self.max_bfregs()).find(|&i| self.count.get(i as usize) == Some(&0));
            if found.is_none() && self.num_med() > 0 {
                let mut min = 1u32;
                for i in 1..first_hi {
                    if self.count.get(i as usize) < self.count.get(min as usize) {
                        min = i;
                    }
                    if self.count.get(min as usize) == Some(&0) {
                        break;
                    }
                }
                found = Some(min);
            }
        }
        let n = found.unwrap_or(0);
        if let Some(c) = self.count.get_mut(n as usize) {
            *c += 1;
        }
        n
    }

    /// The page id a bfreg's doorbells go to.
    pub(crate) fn bfreg_page(&self, bfregn: u32) -> Option<u32> {
        self.sys_pages.get((bfregn / NON_FP_BFREGS_PER_UAR) as usize)?.as_ref().map(|u| u.page)
    }

    /// `bfregn_to_uar_index` for a dynamic bfreg named by the application.
    pub(crate) fn dyn_bfreg_page(&self, bfregn: u32) -> Result<u32> {
        let idx = bfregn / NON_FP_BFREGS_PER_UAR + self.num_static_sys_pages;
        if idx >= self.num_sys_pages || bfregn > self.num_dyn_bfregs {
            return Err(Errno::EINVAL);
        }
        self.sys_pages.get(idx as usize).and_then(|p| p.as_ref()).map(|u| u.page).ok_or(Errno::EINVAL)
    }
}

/// libmlx5's number for a driver bfreg (`adjust_bfregn`): 4 per UAR in its table.
pub(crate) fn adjust_bfregn(bfregn: u32) -> u32 {
    bfregn / NON_FP_BFREGS_PER_UAR * BFREGS_PER_UAR + bfregn % NON_FP_BFREGS_PER_UAR
}

/// The mlx5 user context (`struct mlx5_ib_ucontext`).
#[derive(Debug)]
pub struct Ucontext {
    /// The DevX uid (`devx_uid`): 0 unless the context was opened with
    /// `MLX5_IB_ALLOC_UCTX_DEVX`.
    pub devx_uid: u16,
    /// 0: CQEs carry the QPN; 1: they carry the QP's user index.
    pub cqe_version: u8,
    pub lib_caps: u64,
    /// Dynamic UARs (`MLX5_LIB_CAP_DYN_UAR`): no static pages, UAR objects instead.
    pub dyn_uar: bool,
    pub(crate) bfregs: Option<StaticUars>,
    /// mmap entries of UAR objects by `cmd << 16 | index` (named after their device page:
    /// `methods::uar::key_for_page`).
    pub(crate) mmap_entries: BTreeMap<u32, Arc<UarObj>>,
    pub(crate) _live: Live,
}

impl Ucontext {
    pub(crate) fn free_bfreg(&mut self, n: u32) {
        if let Some(c) = self.bfregs.as_mut().and_then(|b| b.count.get_mut(n as usize)) {
            *c = c.saturating_sub(1);
        }
    }
}

/// `mlx5_ib_alloc_ucontext`: parses the request in `udata`, builds the context and writes
/// the response. Check order as the driver's (docs/notes/kernel-6.1-uverbs.md §5.1).
pub(crate) fn alloc_ucontext(hca: &Arc<Hca>, udata: &Udata) -> Result<Ucontext> {
    let inlen = udata.inp.len();
    let ver = if inlen == 8 {
        0
    } else if inlen >= 16 {
        2
    } else {
        return Err(Errno::EINVAL);
    };
    let mut req: AllocUcontextReqV2 = udata.inp.read_prefix()?;
    if req.flags & !ALLOC_UCTX_DEVX != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if req.comp_mask != 0 || req.reserved0 != 0 || req.reserved1 != 0 || req.reserved2 != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    req.total_num_bfregs = req.total_num_bfregs.wrapping_add(1) & !1;
    if req.num_low_latency_bfregs > req.total_num_bfregs.wrapping_sub(1) {
        return Err(Errno::EINVAL);
    }
    // A device configured without dynamic UARs ignores the request, like a kernel that
    // does not know the capability bit.
    let dyn_uar = hca.config().dynamic_uars && req.lib_caps & LIB_CAP_DYN_UAR != 0;
    let bfregs = if dyn_uar { None } else { Some(static_uars(hca, &req, ver)?) };
    // mlx5_ib_devx_create: a firmware user context whose uid every command of this
    // context carries (its UARs were allocated first, as the driver's are).
    let devx_uid = if req.flags & ALLOC_UCTX_DEVX != 0 { super::methods::devx::create_uctx(hca)? } else { 0 };
    let ctx = Ucontext {
        devx_uid,
        cqe_version: if ver == 0 { 0 } else { caps::CQE_VERSION.min(req.max_cqe_version) },
        lib_caps: req.lib_caps,
        dyn_uar,
        bfregs,
        mmap_entries: BTreeMap::new(),
        _live: Live::new(hca.live_counts(), Kind::Context),
    };
    let mut resp = ucontext_resp(hca, &ctx);
    let n = udata.out.len.min(std::mem::size_of::<AllocUcontextResp>());
    resp.response_length = n as u32;
    if let Err(e) = udata.copy_to(&resp.as_bytes()[..n]) {
        if ctx.devx_uid != 0 {
            super::methods::devx::destroy_uctx(hca, ctx.devx_uid);
        }
        return Err(e);
    }
    // libmlx5 maps the static UAR pages and the clock page next (`mlx5_set_context`),
    // maybe past the preload's mmap hook: the doorbell trap looks for them.
    let statics: Vec<u32> = ctx.bfregs.iter().flat_map(|b| b.sys_pages.iter().flatten().map(|u| u.page)).collect();
    hca.device().expect_mappings(&statics, true);
    Ok(ctx)
}

/// `calc_total_bfregs` + `allocate_uars`.
fn static_uars(hca: &Arc<Hca>, req: &AllocUcontextReqV2, ver: u8) -> Result<StaticUars> {
    if req.total_num_bfregs == 0 {
        return Err(Errno::EINVAL);
    }
    if req.total_num_bfregs > caps::MAX_BFREGS {
        return Err(Errno::ENOMEM);
    }
    // One 4 KiB UAR per system page: two bfregs per page (already aligned above).
    let total = req.total_num_bfregs;
    if req.num_low_latency_bfregs > total - 1 {
        return Err(Errno::EINVAL);
    }
    let num_static = total / NON_FP_BFREGS_PER_UAR;
    let num_dyn = caps::MAX_DYN_BFREGS;
    let total_all = total + num_dyn;
    let num_sys_pages = total_all / NON_FP_BFREGS_PER_UAR;
    let mut sys_pages = vec![None; num_sys_pages as usize];
    for slot in sys_pages.iter_mut().take(num_static as usize) {
        let page = hca.pages().alloc().ok_or(Errno::ENOMEM)?;
        *slot = Some(super::methods::uar::new_uar(hca, page, UarKind::BlueFlame, None));
    }
    Ok(StaticUars {
        ver,
        total_num_bfregs: total_all,
        num_low_latency_bfregs: req.num_low_latency_bfregs,
        num_static_sys_pages: num_static,
        num_dyn_bfregs: num_dyn,
        num_sys_pages,
        sys_pages,
        count: vec![0; total_all as usize],
    })
}

/// `set_ucontext_resp`: the 72-byte context response (also QUERY_CONTEXT's).
pub(crate) fn ucontext_resp(hca: &Hca, ctx: &Ucontext) -> AllocUcontextResp {
    let cfg = hca.config();
    let (tot_bfregs, num_dyn_bfregs) = match &ctx.bfregs {
        Some(b) => (b.total_num_bfregs - b.num_dyn_bfregs, b.num_dyn_bfregs),
        None => (0, 0),
    };
    AllocUcontextResp {
        qp_tab_size: 1 << caps::LOG_MAX_QP,
        bf_reg_size: if cfg.write_combining { 1 << caps::LOG_BF_REG_SIZE } else { 0 },
        tot_bfregs,
        cache_line_size: 64,
        max_sq_desc_sz: caps::MAX_WQE_SZ_SQ as u16,
        max_rq_desc_sz: caps::MAX_WQE_SZ_RQ as u16,
        max_send_wqebb: 1 << caps::LOG_MAX_QP_SZ,
        max_recv_wr: 1 << caps::LOG_MAX_QP_SZ,
        max_srq_recv_wr: 1 << caps::LOG_MAX_SRQ_SZ,
        num_ports: 1,
        flow_action_flags: 0,
        comp_mask: RESP_MASK_CORE_CLOCK_OFFSET | RESP_MASK_DUMP_FILL_MKEY,
        response_length: 0,
        cqe_version: ctx.cqe_version,
        cmds_supp_uhw: CMDS_SUPP_UHW_QUERY_DEVICE | CMDS_SUPP_UHW_CREATE_AH,
        // min_inline_mode NONE, plus one.
        eth_min_inline: 1,
        clock_info_versions: 1 << uverbs::sys::mlx5::CLOCK_INFO_V1,
        hca_core_clock_offset: 0,
        log_uar_size: 12,
        num_uars_per_page: 1,
        num_dyn_bfregs,
        dump_fill_mkey: hca.dump_fill_mkey(),
    }
}

/// The core device attributes (`ib_device_attr` as copied into the legacy response).
pub(crate) fn query_device_core(hca: &Hca) -> QueryDeviceResp {
    let cfg = hca.config();
    let max_qp = 1u32 << caps::LOG_MAX_QP;
    let max_qp_rd_atom = 1u32 << caps::LOG_MAX_RA_REQ_QP;
    let max_send_sge = (caps::MAX_WQE_SZ_SQ.min(512) - 16 - 16) / 16;
    let max_recv_sge = caps::MAX_WQE_SZ_RQ / 16;
    QueryDeviceResp {
        fw_ver: cfg.fw_ver_u64(),
        node_guid: u64::from_ne_bytes(cfg.node_guid),
        sys_image_guid: u64::from_ne_bytes(cfg.sys_image_guid),
        max_mr_size: u64::MAX,
        page_size_cap: !(4096u64 - 1),
        vendor_id: cfg.vendor_id,
        vendor_part_id: cfg.vendor_part_id,
        hw_ver: cfg.hw_ver,
        max_qp,
        max_qp_wr: 1 << caps::LOG_MAX_QP_SZ,
        device_cap_flags: DEVICE_CAP_FLAGS as u32,
        max_sge: max_send_sge.min(max_recv_sge),
        max_sge_rd: caps::MAX_SGE_RD,
        max_cq: 1 << caps::LOG_MAX_CQ,
        max_cqe: (1 << caps::LOG_MAX_CQ_SZ) - 1,
        max_mr: 1 << caps::LOG_MAX_MKEY,
        max_pd: 1 << caps::LOG_MAX_PD,
        max_qp_rd_atom,
        max_res_rd_atom: max_qp_rd_atom.wrapping_mul(max_qp),
        max_qp_init_rd_atom: 1 << caps::LOG_MAX_RA_RES_QP,
        atomic_cap: 1,
        max_mcast_grp: 1 << caps::LOG_MAX_MCG,
        max_mcast_qp_attach: caps::MAX_QP_MCG,
        max_total_mcast_qp_attach: caps::MAX_QP_MCG << caps::LOG_MAX_MCG,
        max_ah: i32::MAX as u32,
        max_srq: 1 << caps::LOG_MAX_SRQ,
        max_srq_wr: (1 << caps::LOG_MAX_SRQ_SZ) - 1,
        max_srq_sge: max_recv_sge - 1,
        max_pkeys: caps::PKEY_TABLE_LEN as u16,
        local_ca_ack_delay: caps::LOCAL_CA_ACK_DELAY,
        phys_port_cnt: 1,
        ..Default::default()
    }
}

/// The extended device attributes (core part of EX_QUERY_DEVICE).
pub(crate) fn query_device_ex_core(hca: &Hca) -> ExQueryDeviceResp {
    ExQueryDeviceResp {
        base: query_device_core(hca),
        timestamp_mask: 0x7fff_ffff_ffff_ffff,
        hca_core_clock: hca.config().core_clock_khz,
        device_cap_flags_ex: DEVICE_CAP_FLAGS,
        ..Default::default()
    }
}

/// `mlx5_ib_query_device`'s driver output: checks the udata and writes
/// `mlx5_ib_query_device_resp`, growing `response_length` by every section that fits.
pub(crate) fn query_device_driver(udata: &Udata) -> Result<()> {
    let outlen = udata.out.len;
    if outlen != 0 && outlen < 8 {
        return Err(Errno::EINVAL);
    }
    if udata.inp.len() != 0 && !udata.inp.is_cleared(0) {
        return Err(Errno::EINVAL);
    }
    let mut resp = Mlx5QueryDeviceResp { response_length: 8, ..Default::default() };
    // (end of section, size): tso, rss, cqe_comp, packet_pacing, multi-packet WQEs, flags,
    // sw parsing, striding RQ, tunnel offloads, DCI streams.
    const SECTIONS: [(usize, u32); 10] =
        [(16, 8), (32, 16), (40, 8), (56, 16), (60, 4), (64, 4), (72, 8), (96, 24), (100, 4), (102, 2)];
    for (end, size) in SECTIONS {
        if end <= outlen {
            resp.response_length += size;
            if end == 64 {
                resp.flags = QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT;
            }
        }
    }
    if outlen != 0 {
        let n = resp.response_length as usize;
        udata.copy_to(&resp.as_bytes()[..n])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uars(total: u32, low: u32, ver: u8) -> StaticUars {
        let hca = crate::hca::Hca::for_tests();
        let num_static = total / 2;
        let total_all = total + caps::MAX_DYN_BFREGS;
        StaticUars {
            ver,
            total_num_bfregs: total_all,
            num_low_latency_bfregs: low,
            num_static_sys_pages: num_static,
            num_dyn_bfregs: caps::MAX_DYN_BFREGS,
            num_sys_pages: total_all / 2,
            sys_pages: (0..total_all / 2)
                .map(|i| (i < num_static).then(|| crate::kernel::methods::uar::new_uar(&hca, 100 + i, UarKind::BlueFlame, None)))
                .collect(),
            count: vec![0; total_all as usize],
        }
    }

    #[test]
    fn bfreg_classes() {
        // 16 bfregs, 4 low latency: 12..15 are dedicated, 1..11 shared, 0 the fallback.
        let mut u = uars(16, 4, 2);
        let got: Vec<u32> = (0..6).map(|_| u.alloc_bfreg()).collect();
        assert_eq!(got, vec![12, 13, 14, 15, 1, 2]);
        assert_eq!(adjust_bfregn(12), 24);
        assert_eq!(adjust_bfregn(13), 25);
        assert_eq!(u.bfreg_page(13), Some(106));
        let mut v0 = uars(16, 4, 0);
        assert_eq!(v0.alloc_bfreg(), 0, "v1 requests always share bfreg 0");
        assert_eq!(v0.count[0], 1);
        let mut tiny = uars(2, 1, 2);
        assert_eq!(tiny.alloc_bfreg(), 1);
        assert_eq!(tiny.alloc_bfreg(), 0, "no medium class: fall back to bfreg 0");
        assert_eq!(u.dyn_bfreg_page(0), Err(Errno::EINVAL), "not mapped yet");
    }

    #[test]
    fn query_device_driver_lengths() {
        let mut out = [0xffu8; 104];
        let u = Udata { out: super::super::udata::OutBuf::user(out.as_mut_ptr() as u64, 104), ..Default::default() };
        query_device_driver(&u).unwrap();
        assert_eq!(u32::from_ne_bytes(out[4..8].try_into().unwrap()), 102);
        assert_eq!(u32::from_ne_bytes(out[60..64].try_into().unwrap()), QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT);
        let u = Udata { out: super::super::udata::OutBuf::user(out.as_mut_ptr() as u64, 20), ..Default::default() };
        query_device_driver(&u).unwrap();
        assert_eq!(u32::from_ne_bytes(out[4..8].try_into().unwrap()), 16);
        let u = Udata { out: super::super::udata::OutBuf::user(out.as_mut_ptr() as u64, 4), ..Default::default() };
        assert_eq!(query_device_driver(&u), Err(Errno::EINVAL));
    }
}
