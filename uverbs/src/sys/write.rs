//! The legacy and extended `write()` commands (ib_user_verbs.h).
//!
//! Legacy: `[cmd_hdr][core command, starting with the u64 response pointer][driver in]`,
//! `in_words` counts 4-byte words of the whole write and `out_words` 4-byte words of the
//! response (core response then driver out, contiguous).
//!
//! Extended (bit 31 of `command`): `[cmd_hdr][ex_cmd_hdr][core][driver in]`, where
//! `in_words`/`out_words` count 8-byte words of the core command/response only and the
//! `provider_*_words` fields count the driver data, also in 8-byte words.


abi_consts! {
    fn write_consts;
    pub const IB_USER_VERBS_ABI_VERSION: u32 = 6 => "IB_USER_VERBS_ABI_VERSION";
    pub const CMD_GET_CONTEXT: u32 = 0 => "IB_USER_VERBS_CMD_GET_CONTEXT";
    pub const CMD_QUERY_DEVICE: u32 = 1 => "IB_USER_VERBS_CMD_QUERY_DEVICE";
    pub const CMD_QUERY_PORT: u32 = 2 => "IB_USER_VERBS_CMD_QUERY_PORT";
    pub const CMD_ALLOC_PD: u32 = 3 => "IB_USER_VERBS_CMD_ALLOC_PD";
    pub const CMD_DEALLOC_PD: u32 = 4 => "IB_USER_VERBS_CMD_DEALLOC_PD";
    pub const CMD_CREATE_AH: u32 = 5 => "IB_USER_VERBS_CMD_CREATE_AH";
    pub const CMD_DESTROY_AH: u32 = 8 => "IB_USER_VERBS_CMD_DESTROY_AH";
    pub const CMD_REG_MR: u32 = 9 => "IB_USER_VERBS_CMD_REG_MR";
    pub const CMD_DEREG_MR: u32 = 13 => "IB_USER_VERBS_CMD_DEREG_MR";
    pub const CMD_CREATE_COMP_CHANNEL: u32 = 17 => "IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL";
    pub const CMD_CREATE_CQ: u32 = 18 => "IB_USER_VERBS_CMD_CREATE_CQ";
    pub const CMD_DESTROY_CQ: u32 = 20 => "IB_USER_VERBS_CMD_DESTROY_CQ";
    pub const CMD_REQ_NOTIFY_CQ: u32 = 23 => "IB_USER_VERBS_CMD_REQ_NOTIFY_CQ";
    pub const CMD_CREATE_QP: u32 = 24 => "IB_USER_VERBS_CMD_CREATE_QP";
    pub const CMD_QUERY_QP: u32 = 25 => "IB_USER_VERBS_CMD_QUERY_QP";
    pub const CMD_MODIFY_QP: u32 = 26 => "IB_USER_VERBS_CMD_MODIFY_QP";
    pub const CMD_DESTROY_QP: u32 = 27 => "IB_USER_VERBS_CMD_DESTROY_QP";
    /// Software devices' (rxe's) kick of the kernel's requester after a post.
    pub const CMD_POST_SEND: u32 = 28 => "IB_USER_VERBS_CMD_POST_SEND";
    pub const CMD_CREATE_SRQ: u32 = 32 => "IB_USER_VERBS_CMD_CREATE_SRQ";
    pub const CMD_MODIFY_SRQ: u32 = 33 => "IB_USER_VERBS_CMD_MODIFY_SRQ";
    pub const CMD_QUERY_SRQ: u32 = 34 => "IB_USER_VERBS_CMD_QUERY_SRQ";
    pub const CMD_DESTROY_SRQ: u32 = 35 => "IB_USER_VERBS_CMD_DESTROY_SRQ";
    /// Bit 31 of `command` selects the extended header.
    pub const CMD_FLAG_EXTENDED: u32 = 0x8000_0000 => "IB_USER_VERBS_CMD_FLAG_EXTENDED";
    pub const CMD_COMMAND_MASK: u32 = 0xff => "IB_USER_VERBS_CMD_COMMAND_MASK";
    pub const EX_CMD_QUERY_DEVICE: u32 = 1 => "IB_USER_VERBS_EX_CMD_QUERY_DEVICE";
    pub const EX_CMD_CREATE_CQ: u32 = 18 => "IB_USER_VERBS_EX_CMD_CREATE_CQ";
    pub const EX_CMD_CREATE_QP: u32 = 24 => "IB_USER_VERBS_EX_CMD_CREATE_QP";
    pub const EX_CMD_MODIFY_QP: u32 = 26 => "IB_USER_VERBS_EX_CMD_MODIFY_QP";
}

abi_struct! {
    /// `struct ib_uverbs_cmd_hdr`: the first 8 bytes of every write().
    pub struct CmdHdr = "struct ib_uverbs_cmd_hdr" {
        command: u32,
        in_words: u16,
        out_words: u16,
    }
}

abi_struct! {
    /// `struct ib_uverbs_ex_cmd_hdr`: follows [`CmdHdr`] in extended commands.
    pub struct ExCmdHdr = "struct ib_uverbs_ex_cmd_hdr" {
        response: u64,
        provider_in_words: u16,
        provider_out_words: u16,
        cmd_hdr_reserved: u32,
    }
}
