//! Typed builders of PRM inboxes over the `prm` layouts, and the commands that only
//! read (QUERY_HCA_CAP, QUERY_QP).
//!
//! Each builder returns the inbox as bytes, zeroed except for what it sets (the PRM
//! wants reserved fields zero), ready for [`DevxContext::create_obj`](crate::DevxContext::create_obj),
//! [`Obj::modify`](crate::Obj::modify) or [`DevxContext::general_cmd`](crate::DevxContext::general_cmd);
//! [`outbox`] sizes the answer. The uid is left 0: the kernel writes the caller's.

pub mod caps;
pub mod cq;
pub mod mkey;
pub mod qp;
pub mod table;

#[cfg(test)]
mod tests;

use prm::bits::{Layout, ViewMut};
use prm::cmd::header::MboxIn;

/// A zeroed inbox of layout `L` plus `tail` bytes (a page list), with `opcode` set.
pub fn inbox<L: Layout>(opcode: u16, tail: usize) -> Vec<u8> {
    let mut b = vec![0u8; L::BYTES + tail];
    ViewMut::<MboxIn>::new(&mut b).expect("every inbox holds the header").set(MboxIn::opcode, opcode);
    b
}

/// A zeroed outbox of layout `L`.
pub fn outbox<L: Layout>() -> Vec<u8> {
    vec![0u8; L::BYTES]
}

/// A writable view of an inbox built by [`inbox`] (its length is checked there).
pub(crate) fn view<L: Layout>(b: &mut [u8]) -> ViewMut<'_, L> {
    ViewMut::new(b).expect("built with this layout's size")
}
