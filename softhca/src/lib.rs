//! softhca
