//! Address handle created by CREATE_AH. libmlx5 builds UD address vectors in user space
//! and calls CREATE_AH only to learn the destination MAC on RoCE; the HCA itself keeps
//! nothing, so this object only records the attributes and holds its PD.

use std::sync::Arc;

use super::qp::AddressVector;
use super::{Live, Pd};

/// An address handle (`struct ib_ah`).
#[derive(Debug)]
pub struct Ah {
    pub pd: Arc<Pd>,
    pub av: AddressVector,
    pub port: u8,
    pub user_handle: u64,
    pub(crate) _live: Live,
}
