//! The raw kernel ABI: `#[repr(C)]` layouts, command numbers and ids, declared once.
//!
//! Everything here mirrors a uapi header (named in each item's doc) and is checked
//! against the installed headers by `uverbs/tests/layout.rs`. The safe API in the
//! rest of the crate builds on these; nothing here does I/O.

#[macro_use]
pub mod layout;
pub mod flow;
pub mod ids;
pub mod names;
pub mod ioctl;
pub mod mlx5;
pub mod verbs;
pub mod write;

pub use ioctl::{IoctlAttr, IoctlHdr};
pub use write::{CmdHdr, ExCmdHdr};

use layout::{CLayout, Const, Layout};

/// Every ABI struct this crate declares, for the header comparison test.
pub fn layouts() -> Vec<Layout> {
    use verbs::*;
    vec![
        IoctlHdr::LAYOUT, IoctlAttr::LAYOUT, CmdHdr::LAYOUT, ExCmdHdr::LAYOUT,
        GetContext::LAYOUT, GetContextResp::LAYOUT, QueryDevice::LAYOUT, QueryDeviceResp::LAYOUT,
        ExQueryDevice::LAYOUT, ExQueryDeviceResp::LAYOUT, QueryPort::LAYOUT, QueryPortResp::LAYOUT,
        QueryPortRespEx::LAYOUT, GidEntry::LAYOUT, AllocPd::LAYOUT, AllocPdResp::LAYOUT,
        DeallocPd::LAYOUT, RegMr::LAYOUT, RegMrResp::LAYOUT, DeregMr::LAYOUT, Sge::LAYOUT,
        CreateCompChannel::LAYOUT, CreateCompChannelResp::LAYOUT, CompEventDesc::LAYOUT,
        AsyncEventDesc::LAYOUT, CreateCq::LAYOUT, CreateCqResp::LAYOUT, DestroyCq::LAYOUT,
        DestroyCqResp::LAYOUT, QpCap::LAYOUT, CreateQp::LAYOUT, CreateQpResp::LAYOUT,
        ExCreateQp::LAYOUT, ExCreateQpResp::LAYOUT, QpDest::LAYOUT, ModifyQp::LAYOUT,
        ExModifyQp::LAYOUT, ExModifyQpResp::LAYOUT, QueryQp::LAYOUT, QueryQpResp::LAYOUT,
        DestroyQp::LAYOUT, DestroyQpResp::LAYOUT, AhAttr::LAYOUT, CreateAh::LAYOUT, CreateAhResp::LAYOUT,
        DestroyAh::LAYOUT, ExCreateCq::LAYOUT, ExCreateCqResp::LAYOUT, mlx5::CreateAhResp::LAYOUT,
        mlx5::AllocUcontextReqV2::LAYOUT, mlx5::AllocUcontextReq::LAYOUT,
        mlx5::AllocUcontextResp::LAYOUT, mlx5::AllocPdResp::LAYOUT, mlx5::QueryDeviceResp::LAYOUT,
        mlx5::CreateCq::LAYOUT, mlx5::CreateCqResp::LAYOUT, mlx5::CreateQp::LAYOUT,
        mlx5::CreateQpResp::LAYOUT, mlx5::ModifyQp::LAYOUT, mlx5::ModifyQpResp::LAYOUT,
        mlx5::ClockInfo::LAYOUT, CreateSrq::LAYOUT, CreateXsrq::LAYOUT, CreateSrqResp::LAYOUT, ModifySrq::LAYOUT, QuerySrq::LAYOUT,
        QuerySrqResp::LAYOUT, DestroySrq::LAYOUT, DestroySrqResp::LAYOUT, mlx5::CreateSrq::LAYOUT,
        mlx5::CreateSrqResp::LAYOUT, OpenXrcd::LAYOUT, OpenXrcdResp::LAYOUT, CloseXrcd::LAYOUT,
        PostSendResp::LAYOUT,
        flow::FlowAttr::LAYOUT, flow::CreateFlow::LAYOUT, flow::CreateFlowResp::LAYOUT,
        flow::DestroyFlow::LAYOUT, flow::FlowSpecHdr::LAYOUT, flow::EthFilter::LAYOUT,
        flow::Ipv4Filter::LAYOUT, flow::Ipv6Filter::LAYOUT, flow::TcpUdpFilter::LAYOUT,
        flow::TunnelFilter::LAYOUT, flow::EspFilter::LAYOUT, flow::GreFilter::LAYOUT,
        flow::MplsFilter::LAYOUT, flow::FlowSpecEth::LAYOUT, flow::FlowSpecIpv4::LAYOUT,
        flow::FlowSpecIpv6::LAYOUT, flow::FlowSpecTcpUdp::LAYOUT, flow::FlowSpecActionTag::LAYOUT,
        flow::FlowSpecActionDrop::LAYOUT, flow::FlowSpecActionHandle::LAYOUT,
        flow::FlowSpecActionCount::LAYOUT,
    ]
}

/// Every ABI constant this crate declares, for the header comparison test.
pub fn consts() -> Vec<Const> {
    let mut v = ioctl::ioctl_consts();
    v.extend(write::write_consts());
    v.extend(ids::id_consts());
    v.extend(verbs::verbs_consts());
    v.extend(mlx5::mlx5_consts());
    v.extend(flow::flow_consts());
    v
}
