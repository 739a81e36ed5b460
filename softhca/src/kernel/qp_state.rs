//! The QP state machine: which transitions exist and which attributes each one requires
//! or allows (the core's `ib_modify_qp_is_ok`), plus the transitions mlx5 firmware has a
//! command for.
//!
//! A MODIFY_QP with mask `m` going from `cur` to `next` is legal when the pair is a valid
//! transition, `m` contains every required attribute, and `m` has nothing outside
//! required | optional | STATE. CUR_STATE may only be given when the current state is
//! RTR, RTS, SQD or SQE. Anything else is EINVAL.

use uverbs::sys::verbs::qp_attr::*;

use crate::objects::{QpState, QpType};

/// `IB_QP_ATTR_STANDARD_BITS`: the attribute bits legacy MODIFY_QP may carry.
pub(crate) const STANDARD_BITS: u32 = (1 << 21) - 1;

const INIT_ARGS: u32 = PKEY_INDEX | PORT | ACCESS_FLAGS;
const ALT_ACCESS_MIG: u32 = ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE;

/// Required and optional attributes of `cur -> next` for `ty`, or None when the
/// transition does not exist.
pub(crate) fn transition(cur: QpState, next: QpState, ty: QpType) -> Option<(u32, u32)> {
    use QpState::*;
    use QpType::*;
    let none = Some((0, 0));
    match (cur, next) {
        (Reset, Reset) => none,
        (Reset, Init) => Some((match ty {
            Ud => PKEY_INDEX | PORT | QKEY,
            RawPacket => PORT,
            Rc | Uc | XrcIni | XrcTgt => INIT_ARGS,
            Driver => 0,
        }, 0)),
        (Init, Init) => Some((0, match ty {
            Ud => PKEY_INDEX | PORT | QKEY,
            Rc | Uc | XrcIni | XrcTgt => INIT_ARGS,
            RawPacket | Driver => 0,
        })),
        (Init, Rtr) => Some(match ty {
            Uc | XrcIni => (AV | PATH_MTU | DEST_QPN | RQ_PSN, ALT_PATH | ACCESS_FLAGS | PKEY_INDEX),
            Rc | XrcTgt => (AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
                            ALT_PATH | ACCESS_FLAGS | PKEY_INDEX),
            Ud => (0, PKEY_INDEX | QKEY),
            RawPacket | Driver => (0, 0),
        }),
        (Rtr, Rts) => Some(match ty {
            Ud => (SQ_PSN, CUR_STATE | QKEY),
            Uc => (SQ_PSN, CUR_STATE | ALT_ACCESS_MIG),
            Rc => (TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC,
                   CUR_STATE | ALT_ACCESS_MIG | MIN_RNR_TIMER),
            XrcIni => (TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC, CUR_STATE | ALT_ACCESS_MIG),
            XrcTgt => (TIMEOUT | SQ_PSN, CUR_STATE | ALT_ACCESS_MIG | MIN_RNR_TIMER),
            RawPacket => (0, RATE_LIMIT),
            Driver => (0, 0),
        }),
        (Rts, Rts) => Some((0, match ty {
            Ud => CUR_STATE | QKEY,
            Uc | XrcIni => CUR_STATE | ALT_ACCESS_MIG,
            Rc | XrcTgt => CUR_STATE | ALT_ACCESS_MIG | MIN_RNR_TIMER,
            RawPacket => RATE_LIMIT,
            Driver => 0,
        })),
        (Rts, Sqd) => Some((0, match ty {
            Ud | Uc | Rc | XrcIni | XrcTgt => EN_SQD_ASYNC_NOTIFY,
            RawPacket | Driver => 0,
        })),
        (Sqd, Rts) => Some((0, match ty {
            Ud => CUR_STATE | QKEY,
            Uc | XrcIni => CUR_STATE | ALT_ACCESS_MIG,
            Rc | XrcTgt => CUR_STATE | ALT_ACCESS_MIG | MIN_RNR_TIMER,
            RawPacket | Driver => 0,
        })),
        (Sqd, Sqd) => Some((0, match ty {
            Ud => PKEY_INDEX | QKEY,
            Uc => AV | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | PATH_MIG_STATE,
            Rc => PORT | AV | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC | MAX_DEST_RD_ATOMIC
                | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | MIN_RNR_TIMER | PATH_MIG_STATE,
            XrcIni => PORT | AV | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC | ALT_PATH
                | ACCESS_FLAGS | PKEY_INDEX | PATH_MIG_STATE,
            XrcTgt => PORT | AV | TIMEOUT | MAX_DEST_RD_ATOMIC | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX
                | MIN_RNR_TIMER | PATH_MIG_STATE,
            RawPacket | Driver => 0,
        })),
        (Sqe, Rts) => Some((0, match ty {
            Ud => CUR_STATE | QKEY,
            Uc => CUR_STATE | ACCESS_FLAGS,
            _ => 0,
        })),
        (Init | Rtr | Rts | Sqd | Sqe | Err, Reset | Err) => none,
        _ => None,
    }
}

/// `ib_modify_qp_is_ok`: whether `mask` is a legal modify from `cur` to `next`.
pub(crate) fn modify_qp_is_ok(cur: QpState, next: QpState, ty: QpType, mask: u32) -> bool {
    if mask & CUR_STATE != 0 && !matches!(cur, QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe) {
        return false;
    }
    let Some((req, opt)) = transition(cur, next, ty) else { return false };
    mask & req == req && mask & !(req | opt | STATE) == 0
}

/// Whether mlx5 firmware has a command for `cur -> next` (`optab` of
/// `__mlx5_ib_modify_qp`). RTS->SQD and SQD->SQD have none, so mlx5 answers EINVAL for
/// them although the core table allows them; SQD->RTS exists but SQD is unreachable.
pub(crate) fn mlx5_has_command(cur: QpState, next: QpState) -> bool {
    use QpState::*;
    matches!((cur, next),
        (Reset, Reset | Init | Err)
        | (Init, Reset | Err | Init | Rtr)
        | (Rtr, Reset | Err | Rts)
        | (Rts, Reset | Err | Rts)
        | (Sqd, Reset | Err | Rts)
        | (Sqe, Reset | Err | Rts)
        | (Err, Reset | Err))
}

#[cfg(test)]
mod tests {
    //! The expectations below are written out from the fact sheet's table (docs/notes/kernel-6.1-uverbs.md
    //! §4.2, RC and UD columns, and the UC notes), independently of `transition`.
    use super::*;
    use QpState::*;

    const RC_RTR_REQ: u32 = AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    const RC_RTS_REQ: u32 = TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC;

    /// (from, to, required, optional) for one QP type; pairs not listed are invalid.
    fn expected(ty: QpType) -> Vec<(QpState, QpState, u32, u32)> {
        let (init_req, init_opt, rtr, rts, rts_rts, sqd_sqd, sqe_rts) = match ty {
            QpType::Rc => (
                PKEY_INDEX | PORT | ACCESS_FLAGS,
                PKEY_INDEX | PORT | ACCESS_FLAGS,
                (RC_RTR_REQ, ALT_PATH | ACCESS_FLAGS | PKEY_INDEX),
                (RC_RTS_REQ, CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE),
                CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE | MIN_RNR_TIMER,
                PORT | AV | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC | MAX_DEST_RD_ATOMIC
                    | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | MIN_RNR_TIMER | PATH_MIG_STATE,
                0,
            ),
            QpType::Uc => (
                PKEY_INDEX | PORT | ACCESS_FLAGS,
                PKEY_INDEX | PORT | ACCESS_FLAGS,
                (AV | PATH_MTU | DEST_QPN | RQ_PSN, ALT_PATH | ACCESS_FLAGS | PKEY_INDEX),
                (SQ_PSN, CUR_STATE | ALT_PATH | ACCESS_FLAGS | PATH_MIG_STATE),
                CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE,
                AV | ALT_PATH | ACCESS_FLAGS | PKEY_INDEX | PATH_MIG_STATE,
                CUR_STATE | ACCESS_FLAGS,
            ),
            QpType::Ud => (
                PKEY_INDEX | PORT | QKEY,
                PKEY_INDEX | PORT | QKEY,
                (0, PKEY_INDEX | QKEY),
                (SQ_PSN, CUR_STATE | QKEY),
                CUR_STATE | QKEY,
                PKEY_INDEX | QKEY,
                CUR_STATE | QKEY,
            ),
            _ => unreachable!(),
        };
        let mut v = vec![
            (Reset, Reset, 0, 0),
            (Reset, Init, init_req, 0),
            (Init, Init, 0, init_opt),
            (Init, Rtr, rtr.0, rtr.1),
            (Rtr, Rts, rts.0, rts.1),
            (Rts, Rts, 0, rts_rts),
            (Rts, Sqd, 0, EN_SQD_ASYNC_NOTIFY),
            (Sqd, Rts, 0, rts_rts),
            (Sqd, Sqd, 0, sqd_sqd),
            (Sqe, Rts, 0, sqe_rts),
        ];
        for s in [Init, Rtr, Rts, Sqd, Sqe, Err] {
            v.push((s, Reset, 0, 0));
            v.push((s, Err, 0, 0));
        }
        v
    }

    #[test]
    fn every_pair_for_rc_uc_ud() {
        let mut checked = 0;
        for ty in [QpType::Rc, QpType::Uc, QpType::Ud] {
            let table = expected(ty);
            for from in QpState::ALL {
                for to in QpState::ALL {
                    let entry = table.iter().find(|e| e.0 == from && e.1 == to);
                    let Some(&(_, _, req, opt)) = entry else {
                        assert!(!modify_qp_is_ok(from, to, ty, STATE), "{ty:?} {from:?}->{to:?} must be invalid");
                        assert!(!modify_qp_is_ok(from, to, ty, STATE | STANDARD_BITS), "{ty:?} {from:?}->{to:?}");
                        checked += 1;
                        continue;
                    };
                    let cur_ok = matches!(from, Rtr | Rts | Sqd | Sqe);
                    let base = STATE | req;
                    assert!(modify_qp_is_ok(from, to, ty, base), "{ty:?} {from:?}->{to:?} with the required mask");
                    assert!(modify_qp_is_ok(from, to, ty, base | opt) || (opt & CUR_STATE != 0 && !cur_ok),
                            "{ty:?} {from:?}->{to:?} with every optional bit");
                    for bit in (0..21).map(|b| 1u32 << b) {
                        if req & bit != 0 {
                            assert!(!modify_qp_is_ok(from, to, ty, base & !bit), "{ty:?} {from:?}->{to:?} missing {bit:#x}");
                        } else if opt & bit != 0 {
                            assert_eq!(modify_qp_is_ok(from, to, ty, base | bit), bit != CUR_STATE || cur_ok,
                                       "{ty:?} {from:?}->{to:?} optional {bit:#x}");
                        } else if bit != STATE {
                            assert!(!modify_qp_is_ok(from, to, ty, base | bit), "{ty:?} {from:?}->{to:?} extra {bit:#x}");
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 3 * 49);
    }

    #[test]
    fn cur_state_only_from_rtr_rts_sqd_sqe() {
        // INIT->INIT with CUR_STATE: the table has no CUR_STATE there, and INIT may not
        // name a current state anyway.
        assert!(!modify_qp_is_ok(Init, Init, QpType::Rc, STATE | CUR_STATE));
        assert!(modify_qp_is_ok(Rts, Rts, QpType::Rc, STATE | CUR_STATE));
        // Without STATE the target is the current state: INIT->INIT with ACCESS only.
        assert!(modify_qp_is_ok(Init, Init, QpType::Rc, ACCESS_FLAGS));
        assert!(!modify_qp_is_ok(Reset, Err, QpType::Rc, STATE));
        assert!(modify_qp_is_ok(Rtr, Rts, QpType::RawPacket, STATE | RATE_LIMIT));
        assert!(modify_qp_is_ok(Reset, Init, QpType::RawPacket, STATE | PORT));
    }

    #[test]
    fn mlx5_firmware_commands() {
        assert!(!mlx5_has_command(Rts, Sqd));
        assert!(!mlx5_has_command(Sqd, Sqd));
        assert!(mlx5_has_command(Sqd, Rts));
        assert!(mlx5_has_command(Sqe, Rts));
        assert!(!mlx5_has_command(Rts, Rtr));
        assert!(mlx5_has_command(Err, Reset));
    }
}
