//! The mailbox headers every command shares (`mlx5_ifc_mbox_in_bits`,
//! `mlx5_ifc_mbox_out_bits`).
//!
//! A firmware reads the opcode from any inbox through [`MboxIn`] before it knows the
//! command, and every outbox answers through [`MboxOut`]; the 16 bits at 0x10 are the
//! `uid` in every inbox (DevX writes the caller's context uid there, 0 is the
//! kernel), even where an older PRM copy calls them reserved.

use crate::layout;

layout! {
    /// The inbox header: the first 16 bytes of every command.
    pub struct MboxIn = mbox_in {
        /// The command ([`super::opcode`]).
        opcode: 0x10,
        /// The issuing DevX context (0: the kernel).
        uid: 0x10,
        reserved_at_20: [0x10],
        /// Command-specific modifier (the capability page for QUERY_HCA_CAP).
        op_mod: 0x10,
        reserved_at_40: [0x40],
    }
}

layout! {
    /// The outbox header: the first 16 bytes of every answer.
    pub struct MboxOut = mbox_out {
        /// [`super::status`]: 0 is success.
        status: 0x8,
        reserved_at_8: [0x18],
        /// Firmware-specific detail of a failure (0 on success).
        syndrome: 0x20,
        reserved_at_40: [0x40],
    }
}

layout! {
    /// The inbox header of the general-object commands (CREATE/MODIFY/QUERY/DESTROY_GENERAL_OBJECT).
    pub struct GeneralObjInCmdHdr = general_obj_in_cmd_hdr {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        obj_type: 0x10,
        obj_id: 0x20,
        reserved_at_60: [0x3],
        log_obj_range: 0x5,
        reserved_at_68: [0x18],
    }
}

layout! {
    /// The outbox header of the general-object commands: the object's id.
    pub struct GeneralObjOutCmdHdr = general_obj_out_cmd_hdr {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        obj_id: 0x20,
        reserved_at_60: [0x20],
    }
}
