//! Pinned staging buffers for softhca's GPU-memory MRs, allocated ahead, at
//! registration, and lent from a process-wide pool on the data path.
//!
//! Why: softhca asks for a staging buffer ([`softhca::peer::PeerMemory::staging_buffer`])
//! when a QP first moves GPU memory, that is inside a receive or send, on whatever thread
//! steps the device: under NCCL, its proxy thread. `cuMemHostAlloc` takes a lock of the
//! CUDA context for writing, and the program's own thread may hold that lock while it
//! waits for the GPU: a first `cuLaunchKernel` of a kernel whose module is not loaded
//! yet (CUDA's lazy loading, the default since CUDA 12.2) did so on the H200 while
//! NCCL's kernel waited for the very data the proxy thread was staging, and both ranks
//! hung (docs/nccl.md has the stacks). A real NIC's DMA makes no CUDA call at all; the
//! emulation keeps CUDA allocations off the data path by filling this pool when the MR
//! is registered ([`prefill`], from [`crate::peer::CudaPeer::new`]) and lending from it
//! ([`take`]). The copies themselves (`cuMemcpyHtoDAsync` on a private stream) were not
//! seen to block there.
//!
//! A lent buffer goes back to the pool when softhca drops it (at the QP's end), without
//! a CUDA call; pooled buffers live as long as the process.

use std::sync::Mutex;

use cudarc::driver::sys;
use softhca::peer::HostBuffer;

use crate::error::Result;
use crate::pinned::alloc_portable;

/// Buffers [`prefill`] keeps ready per device: two stages (one in, one out) for each of
/// the eight QPs NCCL opens between two ranks with 2 to 4 channels; more are allocated
/// on demand, on the data path, as before.
pub const PREFILL: usize = 16;

/// Free buffers: (device, buffer).
static POOL: Mutex<Vec<(sys::CUdevice, HostBuffer)>> = Mutex::new(Vec::new());
/// How many buffers of each device exist (free or lent).
static MADE: Mutex<Vec<(sys::CUdevice, usize)>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Makes sure [`PREFILL`] buffers of `len` bytes exist for device `dev` (allocating the
/// missing ones now, with `cuMemHostAlloc`).
pub fn prefill(dev: sys::CUdevice, len: usize) -> Result<()> {
    let mut made = lock(&MADE);
    let i = match made.iter().position(|(d, _)| *d == dev) {
        Some(i) => i,
        None => {
            made.push((dev, 0));
            made.len() - 1
        }
    };
    while made[i].1 < PREFILL {
        let b = alloc_portable(dev, len)?;
        lock(&POOL).push((dev, b));
        made[i].1 += 1;
    }
    Ok(())
}

/// A pooled buffer of at least `len` bytes for device `dev`, if one is free; it returns
/// to the pool when dropped.
pub fn take(dev: sys::CUdevice, len: usize) -> Option<HostBuffer> {
    let mut pool = lock(&POOL);
    let i = pool.iter().position(|(d, b)| *d == dev && b.len() >= len)?;
    let (dev, mut owned) = pool.swap_remove(i);
    drop(pool);
    let n = owned.len();
    let ptr = std::ptr::NonNull::new(owned.as_mut_slice().as_mut_ptr())?;
    let back = move || lock(&POOL).push((dev, owned));
    // SAFETY: `n` bytes at `ptr` belong to `owned`, which the release closure holds (and
    // nothing else uses) until it puts it back in the pool, after the lent buffer's last
    // use; the memory is freed only by `owned`'s own release, never by this one.
    Some(unsafe { HostBuffer::from_raw(ptr, n, back) })
}

/// Free buffers of device `dev` now (for tests).
pub fn free_count(dev: sys::CUdevice) -> usize {
    lock(&POOL).iter().filter(|(d, _)| *d == dev).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefilled buffers are lent without a new allocation and come back when dropped.
    #[test]
    fn lends_and_takes_back() {
        let gpu = match crate::cuda::Gpu::open(0) {
            Ok(g) => g,
            Err(e) => {
                testkit::skip(testkit::Need::Gpu, format!("no GPU: {e}"));
                return;
            }
        };
        let dev = gpu.cu_device();
        prefill(dev, 1 << 20).unwrap();
        let before = free_count(dev);
        assert!(before >= PREFILL);
        let mut a = take(dev, 1 << 20).unwrap();
        a.as_mut_slice()[..4].copy_from_slice(b"gdr!");
        assert_eq!(free_count(dev), before - 1);
        drop(a);
        assert_eq!(free_count(dev), before);
        assert!(take(dev, 2 << 20).is_none(), "no buffer is that large");
    }
}
