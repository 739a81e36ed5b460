//! Command opcodes (`MLX5_CMD_OP_*`): the `opcode` field of every inbox.
//!
//! The numbers of the PRM command table (rdma-core's `mlx5_ifc.h` lists them too);
//! these are the commands DevX experiments and softhca's firmware deal in.

pub const QUERY_HCA_CAP: u16 = 0x100;
pub const SET_HCA_CAP: u16 = 0x109;
pub const CREATE_MKEY: u16 = 0x200;
pub const QUERY_MKEY: u16 = 0x201;
pub const DESTROY_MKEY: u16 = 0x202;
pub const QUERY_EQ: u16 = 0x303;
pub const CREATE_CQ: u16 = 0x400;
pub const DESTROY_CQ: u16 = 0x401;
pub const QUERY_CQ: u16 = 0x402;
pub const MODIFY_CQ: u16 = 0x403;
pub const CREATE_QP: u16 = 0x500;
pub const DESTROY_QP: u16 = 0x501;
pub const RST2INIT_QP: u16 = 0x502;
pub const INIT2RTR_QP: u16 = 0x503;
pub const RTR2RTS_QP: u16 = 0x504;
pub const RTS2RTS_QP: u16 = 0x505;
pub const SQERR2RTS_QP: u16 = 0x506;
/// Any state to ERR (`MLX5_CMD_OP_2ERR_QP`).
pub const QP_2ERR: u16 = 0x507;
/// Any state to RESET (`MLX5_CMD_OP_2RST_QP`).
pub const QP_2RST: u16 = 0x50a;
pub const QUERY_QP: u16 = 0x50b;
pub const INIT2INIT_QP: u16 = 0x50e;
pub const CREATE_SRQ: u16 = 0x700;
pub const DESTROY_SRQ: u16 = 0x701;
pub const QUERY_SRQ: u16 = 0x702;
/// Arms an SRQ's limit event (`lwm`) with op_mod [`crate::cmd::srq::ARM_RQ_OP_MOD_SRQ`].
pub const ARM_RQ: u16 = 0x703;
pub const CREATE_XRC_SRQ: u16 = 0x705;
pub const DESTROY_XRC_SRQ: u16 = 0x706;
pub const QUERY_NIC_VPORT_CONTEXT: u16 = 0x754;
pub const QUERY_ROCE_ADDRESS: u16 = 0x760;
pub const ALLOC_PD: u16 = 0x800;
pub const DEALLOC_PD: u16 = 0x801;
pub const ALLOC_UAR: u16 = 0x802;
pub const DEALLOC_UAR: u16 = 0x803;
pub const ALLOC_XRCD: u16 = 0x80e;
pub const DEALLOC_XRCD: u16 = 0x80f;
pub const ALLOC_TRANSPORT_DOMAIN: u16 = 0x816;
pub const DEALLOC_TRANSPORT_DOMAIN: u16 = 0x817;
pub const CREATE_TIR: u16 = 0x900;
pub const DESTROY_TIR: u16 = 0x902;
pub const CREATE_SQ: u16 = 0x904;
pub const MODIFY_SQ: u16 = 0x905;
pub const DESTROY_SQ: u16 = 0x906;
pub const CREATE_RQ: u16 = 0x908;
pub const MODIFY_RQ: u16 = 0x909;
pub const DESTROY_RQ: u16 = 0x90a;
pub const CREATE_TIS: u16 = 0x912;
pub const DESTROY_TIS: u16 = 0x914;
/// Points a table type's root at a table (`MLX5_CMD_OP_SET_FLOW_TABLE_ROOT`).
pub const SET_FLOW_TABLE_ROOT: u16 = 0x92f;
pub const CREATE_FLOW_TABLE: u16 = 0x930;
pub const DESTROY_FLOW_TABLE: u16 = 0x931;
pub const QUERY_FLOW_TABLE: u16 = 0x932;
pub const CREATE_FLOW_GROUP: u16 = 0x933;
pub const DESTROY_FLOW_GROUP: u16 = 0x934;
/// Creates (op_mod 0) or modifies (op_mod 1) a flow table entry.
pub const SET_FLOW_TABLE_ENTRY: u16 = 0x936;
pub const QUERY_FLOW_TABLE_ENTRY: u16 = 0x937;
pub const DELETE_FLOW_TABLE_ENTRY: u16 = 0x938;
/// rdma-core's mlx5_ifc.h names it MLX5_CMD_OP_CREATE_FLOW_COUNTER.
pub const ALLOC_FLOW_COUNTER: u16 = 0x939;
pub const DEALLOC_FLOW_COUNTER: u16 = 0x93a;
pub const QUERY_FLOW_COUNTER: u16 = 0x93b;
pub const CREATE_GENERAL_OBJECT: u16 = 0xa00;
pub const MODIFY_GENERAL_OBJECT: u16 = 0xa01;
pub const QUERY_GENERAL_OBJECT: u16 = 0xa02;
pub const DESTROY_GENERAL_OBJECT: u16 = 0xa03;
pub const CREATE_UCTX: u16 = 0xa04;
pub const DESTROY_UCTX: u16 = 0xa06;
pub const CREATE_UMEM: u16 = 0xa08;
pub const DESTROY_UMEM: u16 = 0xa0a;
