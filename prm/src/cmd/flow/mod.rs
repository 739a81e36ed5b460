//! NIC flow steering commands: flow tables, flow groups, flow table entries (FTEs)
//! and flow counters, as the PRM lays them out.
//!
//! A ConnectX classifies a received frame against a tree of flow tables. A table has
//! a type (NIC receive is [`table::TABLE_TYPE_NIC_RX`]), a level (a table may only
//! forward to a table of a higher level) and a miss behaviour; its entries are split
//! into flow groups, each a contiguous index range with one match mask (the
//! `match_criteria`, an [`matching::FteMatchParam`] of mask bits plus the
//! `match_criteria_enable` bits saying which parts of it are in use); an entry holds
//! the match value and what to do ([`entry::FlowContext`]: actions, flow tag,
//! destinations, counters).
//!
//! The layouts are Linux's `include/linux/mlx5/mlx5_ifc.h` (v6.x): rdma-core's copy
//! collapses the flow-group and FTE bodies into reserved areas, so the kernel's
//! names are the reference for those; where both have a structure the sizes agree.
//! Each test row in `tests.rs` names the structure its offsets come from.

pub mod counter;
pub mod entry;
pub mod group;
pub mod matching;
pub mod table;

#[cfg(test)]
mod tests;
