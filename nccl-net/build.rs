//! Gives the plugin the SONAME NCCL loads it by (`libnccl-net-doorbell.so`); Cargo
//! cannot put a hyphen in the file name itself (see Cargo.toml).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnccl-net-doorbell.so");
}
