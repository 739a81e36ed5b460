//! Names of the uverbs ioctl objects, methods and attributes and of the legacy write()
//! commands, for log lines and traces: the short forms of the C names in
//! [`super::ids`] (`UVERBS_METHOD_QP_CREATE` is `QP.CREATE`, attribute
//! `UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE` of it is `SEND_CQ`). Both doorbell's own
//! `uverbs::ioctl` events and the preload library's decoded kernel calls use them, so a
//! trace of doorbell and one of a stock program name a command alike. Ids without a
//! name here print as hex (`OBJ_0x1003`, `METHOD_0x1000`, `0x1002`).

use std::borrow::Cow;

use super::ids::{self, object};
use super::write::CMD_FLAG_EXTENDED;

/// The object's name (`UVERBS_OBJECT_CQ` is `CQ`, `MLX5_IB_OBJECT_UAR` is `MLX5_UAR`).
pub fn object_name(o: u16) -> Cow<'static, str> {
    match o {
        object::DEVICE => "DEVICE".into(),
        object::PD => "PD".into(),
        object::COMP_CHANNEL => "COMP_CHANNEL".into(),
        object::CQ => "CQ".into(),
        object::QP => "QP".into(),
        object::SRQ => "SRQ".into(),
        object::AH => "AH".into(),
        object::MR => "MR".into(),
        object::MW => "MW".into(),
        object::FLOW => "FLOW".into(),
        object::XRCD => "XRCD".into(),
        object::RWQ_IND_TBL => "RWQ_IND_TBL".into(),
        object::WQ => "WQ".into(),
        object::FLOW_ACTION => "FLOW_ACTION".into(),
        object::DM => "DM".into(),
        object::COUNTERS => "COUNTERS".into(),
        object::ASYNC_EVENT => "ASYNC_EVENT".into(),
        object::MLX5_DEVX => "MLX5_DEVX".into(),
        object::MLX5_DEVX_OBJ => "MLX5_DEVX_OBJ".into(),
        object::MLX5_DEVX_UMEM => "MLX5_DEVX_UMEM".into(),
        object::MLX5_DEVX_ASYNC_CMD_FD => "MLX5_DEVX_ASYNC_CMD_FD".into(),
        object::MLX5_UAR => "MLX5_UAR".into(),
        object::MLX5_FLOW_MATCHER => "MLX5_FLOW_MATCHER".into(),
        _ => format!("OBJ_{o:#x}").into(),
    }
}

/// The method's name within object `o` (`CREATE`, `GET_CONTEXT`, `UAR_OBJ_ALLOC`).
pub fn method_name(o: u16, m: u16) -> Cow<'static, str> {
    use ids::{async_event, cq, device, mlx5, mr, qp, srq};
    let s = match (o, m) {
        (object::DEVICE, device::INVOKE_WRITE) => "INVOKE_WRITE",
        (object::DEVICE, device::INFO_HANDLES) => "INFO_HANDLES",
        (object::DEVICE, device::QUERY_PORT) => "QUERY_PORT",
        (object::DEVICE, device::GET_CONTEXT) => "GET_CONTEXT",
        (object::DEVICE, device::QUERY_CONTEXT) => "QUERY_CONTEXT",
        (object::DEVICE, device::QUERY_GID_TABLE) => "QUERY_GID_TABLE",
        (object::DEVICE, device::QUERY_GID_ENTRY) => "QUERY_GID_ENTRY",
        (object::PD, 0) | (object::AH, 0) | (object::MW, 0) | (object::XRCD, 0) | (object::FLOW, 0) => "DESTROY",
        (object::CQ, cq::CREATE) | (object::QP, qp::CREATE) | (object::SRQ, srq::CREATE) => "CREATE",
        (object::CQ, cq::DESTROY) | (object::QP, qp::DESTROY) | (object::MR, mr::DESTROY)
        | (object::SRQ, 1) | (object::WQ, 1) => "DESTROY",
        (object::MR, mr::DM_MR_REG) => "DM_MR_REG",
        (object::MR, mr::ADVISE) => "ADVISE",
        (object::MR, mr::QUERY) => "QUERY",
        (object::MR, mr::REG_DMABUF_MR) => "REG_DMABUF_MR",
        (object::ASYNC_EVENT, async_event::ALLOC) => "ALLOC",
        (object::COMP_CHANNEL, 0) => "ALLOC",
        (object::MLX5_DEVX, mlx5::DEVX_OTHER) => "DEVX_OTHER",
        (object::MLX5_DEVX, mlx5::DEVX_QUERY_UAR) => "DEVX_QUERY_UAR",
        (object::MLX5_DEVX, mlx5::DEVX_QUERY_EQN) => "DEVX_QUERY_EQN",
        (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_CREATE) => "DEVX_OBJ_CREATE",
        (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_DESTROY) => "DEVX_OBJ_DESTROY",
        (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_MODIFY) => "DEVX_OBJ_MODIFY",
        (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_QUERY) => "DEVX_OBJ_QUERY",
        (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_ASYNC_QUERY) => "DEVX_OBJ_ASYNC_QUERY",
        (object::MLX5_DEVX_UMEM, mlx5::DEVX_UMEM_REG) => "DEVX_UMEM_REG",
        (object::MLX5_DEVX_UMEM, mlx5::DEVX_UMEM_DEREG) => "DEVX_UMEM_DEREG",
        (object::MLX5_DEVX_ASYNC_CMD_FD, mlx5::DEVX_ASYNC_CMD_FD_ALLOC) => "ALLOC",
        (object::MLX5_FLOW_MATCHER, mlx5::FLOW_MATCHER_CREATE) => "FLOW_MATCHER_CREATE",
        (object::MLX5_FLOW_MATCHER, mlx5::FLOW_MATCHER_DESTROY) => "FLOW_MATCHER_DESTROY",
        (object::FLOW, mlx5::CREATE_FLOW) => "CREATE_FLOW",
        (object::FLOW, mlx5::DESTROY_FLOW) => "DESTROY_FLOW",
        (object::MLX5_UAR, mlx5::UAR_OBJ_ALLOC) => "UAR_OBJ_ALLOC",
        (object::MLX5_UAR, mlx5::UAR_OBJ_DESTROY) => "UAR_OBJ_DESTROY",
        _ => return format!("METHOD_{m:#x}").into(),
    };
    s.into()
}


/// The attribute's name within method `m` of object `o` (`UHW_IN` for any core method's
/// driver input).
pub fn attr_name(o: u16, m: u16, a: u16) -> Cow<'static, str> {
    use ids::{cq, device as d, mlx5, qp};
    // Core objects' driver-namespace attributes are the driver's udata; driver objects
    // (namespace bit set) and driver methods of core objects (mlx5's CREATE_FLOW on
    // FLOW) name their own.
    if o & ids::UVERBS_ID_DRIVER_NS == 0 && m & ids::UVERBS_ID_DRIVER_NS == 0 {
        if a == ids::UVERBS_ATTR_UHW_IN {
            return "UHW_IN".into();
        }
        if a == ids::UVERBS_ATTR_UHW_OUT {
            return "UHW_OUT".into();
        }
    }
    let s = match (o, m) {
        (object::DEVICE, d::INVOKE_WRITE) => match a {
            d::ATTR_CORE_IN => "CORE_IN",
            d::ATTR_CORE_OUT => "CORE_OUT",
            d::ATTR_WRITE_CMD => "WRITE_CMD",
            _ => "",
        },
        (object::DEVICE, d::QUERY_PORT) => match a {
            d::ATTR_QUERY_PORT_PORT_NUM => "PORT_NUM",
            d::ATTR_QUERY_PORT_RESP => "RESP",
            _ => "",
        },
        (object::DEVICE, d::GET_CONTEXT) | (object::DEVICE, d::QUERY_CONTEXT) => match a {
            0 => "NUM_COMP_VECTORS",
            1 => "CORE_SUPPORT",
            _ => "",
        },
        (object::DEVICE, d::QUERY_GID_ENTRY) => match a {
            d::ATTR_QUERY_GID_ENTRY_PORT => "PORT",
            d::ATTR_QUERY_GID_ENTRY_GID_INDEX => "GID_INDEX",
            d::ATTR_QUERY_GID_ENTRY_FLAGS => "FLAGS",
            d::ATTR_QUERY_GID_ENTRY_RESP_ENTRY => "RESP_ENTRY",
            _ => "",
        },
        (object::DEVICE, d::QUERY_GID_TABLE) => match a {
            d::ATTR_QUERY_GID_TABLE_ENTRY_SIZE => "ENTRY_SIZE",
            d::ATTR_QUERY_GID_TABLE_FLAGS => "FLAGS",
            d::ATTR_QUERY_GID_TABLE_RESP_ENTRIES => "RESP_ENTRIES",
            d::ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES => "RESP_NUM_ENTRIES",
            _ => "",
        },
        (object::CQ, cq::CREATE) => match a {
            cq::ATTR_CREATE_HANDLE => "HANDLE",
            cq::ATTR_CREATE_CQE => "CQE",
            cq::ATTR_CREATE_USER_HANDLE => "USER_HANDLE",
            cq::ATTR_CREATE_COMP_CHANNEL => "COMP_CHANNEL",
            cq::ATTR_CREATE_COMP_VECTOR => "COMP_VECTOR",
            cq::ATTR_CREATE_FLAGS => "FLAGS",
            cq::ATTR_CREATE_RESP_CQE => "RESP_CQE",
            cq::ATTR_CREATE_EVENT_FD => "EVENT_FD",
            _ => "",
        },
        (object::QP, qp::CREATE) => match a {
            qp::ATTR_CREATE_HANDLE => "HANDLE",
            qp::ATTR_CREATE_XRCD_HANDLE => "XRCD",
            qp::ATTR_CREATE_PD_HANDLE => "PD",
            qp::ATTR_CREATE_SRQ_HANDLE => "SRQ",
            qp::ATTR_CREATE_SEND_CQ_HANDLE => "SEND_CQ",
            qp::ATTR_CREATE_RECV_CQ_HANDLE => "RECV_CQ",
            qp::ATTR_CREATE_IND_TABLE_HANDLE => "IND_TABLE",
            qp::ATTR_CREATE_USER_HANDLE => "USER_HANDLE",
            qp::ATTR_CREATE_CAP => "CAP",
            qp::ATTR_CREATE_TYPE => "TYPE",
            qp::ATTR_CREATE_FLAGS => "FLAGS",
            qp::ATTR_CREATE_SOURCE_QPN => "SOURCE_QPN",
            qp::ATTR_CREATE_EVENT_FD => "EVENT_FD",
            qp::ATTR_CREATE_RESP_CAP => "RESP_CAP",
            qp::ATTR_CREATE_RESP_QP_NUM => "RESP_QP_NUM",
            _ => "",
        },
        (object::CQ, cq::DESTROY) | (object::QP, qp::DESTROY) | (object::SRQ, 1) | (object::WQ, 1) => match a {
            0 => "HANDLE",
            1 => "RESP",
            _ => "",
        },
        (object::PD, 0) | (object::MR, 1) | (object::AH, 0) | (object::MW, 0) | (object::XRCD, 0) => match a {
            0 => "HANDLE",
            _ => "",
        },
        (object::ASYNC_EVENT, 0) => match a {
            0 => "FD_HANDLE",
            _ => "",
        },
        (object::MLX5_DEVX, mlx5::DEVX_OTHER) => match a {
            mlx5::ATTR_DEVX_OTHER_CMD_IN => "CMD_IN",
            mlx5::ATTR_DEVX_OTHER_CMD_OUT => "CMD_OUT",
            _ => "",
        },
        (object::MLX5_DEVX, mlx5::DEVX_QUERY_UAR) => match a {
            mlx5::ATTR_DEVX_QUERY_UAR_USER_IDX => "USER_IDX",
            mlx5::ATTR_DEVX_QUERY_UAR_DEV_IDX => "DEV_IDX",
            _ => "",
        },
        (object::MLX5_DEVX, mlx5::DEVX_QUERY_EQN) => match a {
            mlx5::ATTR_DEVX_QUERY_EQN_USER_VEC => "USER_VEC",
            mlx5::ATTR_DEVX_QUERY_EQN_DEV_EQN => "DEV_EQN",
            _ => "",
        },
        (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_CREATE | mlx5::DEVX_OBJ_MODIFY | mlx5::DEVX_OBJ_QUERY) => match a {
            // The three methods number their handle, inbox and outbox alike.
            mlx5::ATTR_DEVX_OBJ_CREATE_HANDLE => "HANDLE",
            mlx5::ATTR_DEVX_OBJ_CREATE_CMD_IN => "CMD_IN",
            mlx5::ATTR_DEVX_OBJ_CREATE_CMD_OUT => "CMD_OUT",
            _ => "",
        },
        (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_ASYNC_QUERY) => match a {
            mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE => "HANDLE",
            mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN => "CMD_IN",
            mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_FD => "FD",
            mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID => "WR_ID",
            mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN => "OUT_LEN",
            _ => "",
        },
        (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_DESTROY) | (object::MLX5_DEVX_UMEM, mlx5::DEVX_UMEM_DEREG)
        | (object::MLX5_DEVX_ASYNC_CMD_FD, mlx5::DEVX_ASYNC_CMD_FD_ALLOC) => match a {
            0x1000 => "HANDLE",
            _ => "",
        },
        (object::MLX5_DEVX_UMEM, mlx5::DEVX_UMEM_REG) => match a {
            mlx5::ATTR_DEVX_UMEM_REG_HANDLE => "HANDLE",
            mlx5::ATTR_DEVX_UMEM_REG_ADDR => "ADDR",
            mlx5::ATTR_DEVX_UMEM_REG_LEN => "LEN",
            mlx5::ATTR_DEVX_UMEM_REG_ACCESS => "ACCESS",
            mlx5::ATTR_DEVX_UMEM_REG_OUT_ID => "OUT_ID",
            mlx5::ATTR_DEVX_UMEM_REG_PGSZ_BITMAP => "PGSZ_BITMAP",
            mlx5::ATTR_DEVX_UMEM_REG_DMABUF_FD => "DMABUF_FD",
            _ => "",
        },
        (object::MLX5_UAR, mlx5::UAR_OBJ_ALLOC) => match a {
            mlx5::ATTR_UAR_OBJ_ALLOC_HANDLE => "HANDLE",
            mlx5::ATTR_UAR_OBJ_ALLOC_TYPE => "TYPE",
            mlx5::ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET => "MMAP_OFFSET",
            mlx5::ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH => "MMAP_LENGTH",
            mlx5::ATTR_UAR_OBJ_ALLOC_PAGE_ID => "PAGE_ID",
            _ => "",
        },
        (object::MLX5_UAR, mlx5::UAR_OBJ_DESTROY) => match a {
            mlx5::ATTR_UAR_OBJ_DESTROY_HANDLE => "HANDLE",
            _ => "",
        },
        (object::MLX5_FLOW_MATCHER, mlx5::FLOW_MATCHER_CREATE) => match a {
            mlx5::ATTR_FLOW_MATCHER_CREATE_HANDLE => "HANDLE",
            mlx5::ATTR_FLOW_MATCHER_MATCH_MASK => "MATCH_MASK",
            mlx5::ATTR_FLOW_MATCHER_FLOW_TYPE => "FLOW_TYPE",
            mlx5::ATTR_FLOW_MATCHER_MATCH_CRITERIA => "MATCH_CRITERIA",
            mlx5::ATTR_FLOW_MATCHER_FLOW_FLAGS => "FLOW_FLAGS",
            mlx5::ATTR_FLOW_MATCHER_FT_TYPE => "FT_TYPE",
            _ => "",
        },
        (object::MLX5_FLOW_MATCHER, mlx5::FLOW_MATCHER_DESTROY) | (object::FLOW, mlx5::DESTROY_FLOW) => match a {
            0x1000 => "HANDLE",
            _ => "",
        },
        (object::FLOW, mlx5::CREATE_FLOW) => match a {
            mlx5::ATTR_CREATE_FLOW_HANDLE => "HANDLE",
            mlx5::ATTR_CREATE_FLOW_MATCH_VALUE => "MATCH_VALUE",
            mlx5::ATTR_CREATE_FLOW_DEST_QP => "DEST_QP",
            mlx5::ATTR_CREATE_FLOW_DEST_DEVX => "DEST_DEVX",
            mlx5::ATTR_CREATE_FLOW_MATCHER => "MATCHER",
            mlx5::ATTR_CREATE_FLOW_ARR_FLOW_ACTIONS => "ARR_FLOW_ACTIONS",
            mlx5::ATTR_CREATE_FLOW_TAG => "TAG",
            mlx5::ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX => "ARR_COUNTERS_DEVX",
            mlx5::ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX_OFFSET => "ARR_COUNTERS_DEVX_OFFSET",
            mlx5::ATTR_CREATE_FLOW_FLAGS => "FLAGS",
            _ => "",
        },
        _ => "",
    };
    if s.is_empty() {
        format!("{a:#x}").into()
    } else {
        s.into()
    }
}

/// Names of the legacy write() commands (`IB_USER_VERBS_CMD_*`, EX with bit 31).
pub fn write_cmd_name(cmd: u32) -> Cow<'static, str> {
    // The extended-only commands (IB_USER_VERBS_EX_CMD_*) past the legacy numbers.
    if cmd & CMD_FLAG_EXTENDED != 0 {
        let ex = match cmd & !CMD_FLAG_EXTENDED {
            50 => "EX_CREATE_FLOW",
            51 => "EX_DESTROY_FLOW",
            52 => "EX_CREATE_WQ",
            53 => "EX_MODIFY_WQ",
            54 => "EX_DESTROY_WQ",
            55 => "EX_CREATE_RWQ_IND_TBL",
            56 => "EX_DESTROY_RWQ_IND_TBL",
            57 => "EX_MODIFY_CQ",
            _ => "",
        };
        if !ex.is_empty() {
            return ex.into();
        }
    }
    let base = match cmd & !CMD_FLAG_EXTENDED {
        0 => "GET_CONTEXT",
        1 => "QUERY_DEVICE",
        2 => "QUERY_PORT",
        3 => "ALLOC_PD",
        4 => "DEALLOC_PD",
        5 => "CREATE_AH",
        6 => "MODIFY_AH",
        7 => "QUERY_AH",
        8 => "DESTROY_AH",
        9 => "REG_MR",
        10 => "REG_SMR",
        11 => "REREG_MR",
        12 => "QUERY_MR",
        13 => "DEREG_MR",
        14 => "ALLOC_MW",
        15 => "BIND_MW",
        16 => "DEALLOC_MW",
        17 => "CREATE_COMP_CHANNEL",
        18 => "CREATE_CQ",
        19 => "RESIZE_CQ",
        20 => "DESTROY_CQ",
        21 => "POLL_CQ",
        22 => "PEEK_CQ",
        23 => "REQ_NOTIFY_CQ",
        24 => "CREATE_QP",
        25 => "QUERY_QP",
        26 => "MODIFY_QP",
        27 => "DESTROY_QP",
        28 => "POST_SEND",
        29 => "POST_RECV",
        30 => "ATTACH_MCAST",
        31 => "DETACH_MCAST",
        32 => "CREATE_SRQ",
        33 => "MODIFY_SRQ",
        34 => "QUERY_SRQ",
        35 => "DESTROY_SRQ",
        36 => "POST_SRQ_RECV",
        37 => "OPEN_XRCD",
        38 => "CLOSE_XRCD",
        39 => "CREATE_XSRQ",
        40 => "OPEN_QP",
        _ => return format!("CMD_{cmd:#x}").into(),
    };
    if cmd & CMD_FLAG_EXTENDED != 0 {
        format!("EX_{base}").into()
    } else {
        base.into()
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::layout::Const;

    /// The C name of an id (checked against the kernel headers by the layout tests)
    /// ends with the short name given here, past its prefix.
    fn short_of(c: &Const, prefixes: &[&str]) -> Option<String> {
        prefixes.iter().find_map(|p| c.c_expr.strip_prefix(p)).map(str::to_string)
    }

    #[test]
    fn object_names_are_the_c_names_without_their_prefix() {
        for c in object::consts() {
            let short = short_of(&c, &["UVERBS_OBJECT_"])
                .or_else(|| short_of(&c, &["MLX5_IB_OBJECT_"]).map(|s| format!("MLX5_{s}")))
                .unwrap();
            let name = object_name(c.value as u16);
            // mlx5's flow matcher, event fd, VAR and PP objects are never decoded.
            if name.starts_with("OBJ_") {
                assert!(c.c_expr.starts_with("MLX5_IB_OBJECT_"), "{} has no name", c.c_expr);
                continue;
            }
            assert_eq!(name, short, "{}", c.c_expr);
        }
    }

    #[test]
    fn method_names_are_words_of_the_c_names() {
        // Each module's methods belong to one object (mlx5's spread over several).
        let core: [(u16, fn() -> Vec<Const>); 6] = [
            (object::DEVICE, ids::device::consts), (object::PD, ids::pd::consts), (object::CQ, ids::cq::consts),
            (object::QP, ids::qp::consts), (object::MR, ids::mr::consts), (object::ASYNC_EVENT, ids::async_event::consts),
        ];
        let mut checked = 0;
        for (o, list) in core {
            for c in list().iter().filter(|c| c.c_expr.starts_with("UVERBS_METHOD_")) {
                let name = method_name(o, c.value as u16);
                assert!(!name.starts_with("METHOD_"), "{} has no name", c.c_expr);
                let words = &c.c_expr["UVERBS_METHOD_".len()..];
                assert!(words.split('_').collect::<Vec<_>>().windows(name.split('_').count())
                            .any(|w| w.join("_") == name), "{}: {name}", c.c_expr);
                checked += 1;
            }
        }
        assert!(checked >= 18, "{checked}");
        use ids::mlx5;
        for (o, m, want) in [(object::MLX5_UAR, mlx5::UAR_OBJ_ALLOC, "MLX5_IB_METHOD_UAR_OBJ_ALLOC"),
                             (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_CREATE, "MLX5_IB_METHOD_DEVX_OBJ_CREATE"),
                             (object::MLX5_DEVX, mlx5::DEVX_QUERY_EQN, "MLX5_IB_METHOD_DEVX_QUERY_EQN"),
                             (object::MLX5_FLOW_MATCHER, mlx5::FLOW_MATCHER_CREATE, "MLX5_IB_METHOD_FLOW_MATCHER_CREATE"),
                             (object::FLOW, mlx5::CREATE_FLOW, "MLX5_IB_METHOD_CREATE_FLOW")] {
            assert_eq!(format!("MLX5_IB_METHOD_{}", method_name(o, m)), want);
        }
    }

    #[test]
    fn attribute_names_end_the_c_names() {
        use ids::qp;
        for c in qp::consts().iter().filter(|c| c.c_expr.starts_with("UVERBS_ATTR_CREATE_QP_")) {
            let name = attr_name(object::QP, qp::CREATE, c.value as u16);
            let rest = &c.c_expr["UVERBS_ATTR_CREATE_QP_".len()..];
            assert!(rest == name || rest == format!("{name}_HANDLE"), "{}: {name}", c.c_expr);
        }
        assert_eq!(attr_name(object::QP, qp::CREATE, ids::UVERBS_ATTR_UHW_IN), "UHW_IN");
        assert_eq!(attr_name(object::QP, qp::CREATE, 0x77), "0x77");
        // mlx5's flow attributes: MLX5_IB_ATTR_CREATE_FLOW_<name>, MLX5_IB_ATTR_FLOW_MATCHER_<name>.
        for c in ids::mlx5::consts().iter() {
            let (o, m, rest) = if let Some(r) = c.c_expr.strip_prefix("MLX5_IB_ATTR_CREATE_FLOW_") {
                (object::FLOW, ids::mlx5::CREATE_FLOW, r)
            } else if let Some(r) = c.c_expr.strip_prefix("MLX5_IB_ATTR_FLOW_MATCHER_").filter(|r| !r.starts_with("DESTROY")) {
                (object::MLX5_FLOW_MATCHER, ids::mlx5::FLOW_MATCHER_CREATE, r.strip_prefix("CREATE_").unwrap_or(r))
            } else {
                continue;
            };
            if rest.starts_with("FLAGS_") {
                continue; // flag values, not attributes
            }
            assert_eq!(attr_name(o, m, c.value as u16), rest, "{}", c.c_expr);
        }
    }

    #[test]
    fn write_command_names_are_the_c_names_without_their_prefix() {
        for c in crate::sys::write::write_consts().iter().filter(|c| c.c_expr.starts_with("IB_USER_VERBS_CMD_") && c.value < 0x80) {
            assert_eq!(write_cmd_name(c.value as u32), &c.c_expr["IB_USER_VERBS_CMD_".len()..]);
        }
        assert_eq!(write_cmd_name(CMD_FLAG_EXTENDED | 24), "EX_CREATE_QP");
    }
}
