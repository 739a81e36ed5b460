//! softhca
pub mod uaccess;
pub mod wire;
