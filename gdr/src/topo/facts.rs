//! What sysfs cannot say about a GPU: its name, NVML index, compute capability, NVLinks
//! and GPU NUMA node. NVML answers these on a GPU machine ([`crate::nvml`]); tests and
//! what-if runs give them in a text file instead (`DOORBELL_TOPO_GPUS=FILE`).
//!
//! The file has one line per GPU; `#` starts a comment. Fields are `key=value`, `name=`
//! last because the name has spaces:
//!
//! ```text
//! gpu 0000:13:00.0 index=0 cc=9.0 nvswitch=18 name=NVIDIA H100 80GB HBM3
//! gpu 0000:17:00.0 index=1 cc=9.0 nvlink=0000:13:00.0*4 name=NVIDIA H100 80GB HBM3
//! ```
//!
//! - `index`: the NVML index (nvidia-smi's GPU number); GPUs without one follow in bus order;
//! - `cc`: CUDA compute capability, `major.minor` (NCCL's GDR read rule depends on it);
//! - `nvlink=BUS*N`: N active NVLinks to the GPU (or other device) at BUS; repeatable;
//! - `nvswitch=N`: N active NVLinks to NVSwitches (every GPU pair on the same switches
//!   then shows `NV<min>` as nvidia-smi prints on an HGX board);
//! - `numa=N`: the GPU's own memory NUMA node (`GPU NUMA ID`, C2C systems);
//! - `name`: the product name.

use super::pci::normalize_bus_id;

/// The bus id given for links to NVSwitches (nvidia-smi does not name them).
pub const NVSWITCH: &str = "nvswitch";

/// Facts about one GPU, keyed by bus id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuFacts {
    /// sysfs form (`0000:13:00.0`).
    pub bus_id: String,
    /// NVML index.
    pub index: Option<u32>,
    pub name: Option<String>,
    /// (major, minor).
    pub compute_capability: Option<(u32, u32)>,
    /// Remote end of each active NVLink: a bus id, or [`NVSWITCH`].
    pub nvlinks: Vec<String>,
    /// `nvmlDeviceGetNumaNodeId`.
    pub gpu_numa_id: Option<u32>,
}

/// Parses a facts file (see the module docs); errors name the line.
pub fn parse(text: &str) -> Result<Vec<GpuFacts>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| format!("line {}: {why}: {raw:?}", n + 1);
        let (head, name) = match line.split_once(" name=") {
            Some((h, name)) => (h, Some(name.trim().to_string())),
            None => (line, None),
        };
        let mut words = head.split_whitespace();
        if words.next() != Some("gpu") {
            return Err(bad("expected `gpu BUS-ID key=value...`"));
        }
        let bus = words.next().ok_or_else(|| bad("no bus id"))?;
        let bus_id = normalize_bus_id(bus).ok_or_else(|| bad("bad bus id"))?;
        let mut f = GpuFacts { bus_id, name, ..GpuFacts::default() };
        for w in words {
            let (k, v) = w.split_once('=').ok_or_else(|| bad("expected key=value"))?;
            match k {
                "index" => f.index = Some(v.parse().map_err(|_| bad("bad index"))?),
                "numa" => f.gpu_numa_id = Some(v.parse().map_err(|_| bad("bad numa"))?),
                "cc" => {
                    let (a, b) = v.split_once('.').ok_or_else(|| bad("cc is major.minor"))?;
                    f.compute_capability = Some((a.parse().map_err(|_| bad("bad cc"))?, b.parse().map_err(|_| bad("bad cc"))?));
                }
                "nvswitch" => {
                    let count: usize = v.parse().map_err(|_| bad("bad nvswitch count"))?;
                    f.nvlinks.extend(std::iter::repeat_n(NVSWITCH.to_string(), count));
                }
                "nvlink" => {
                    let (peer, count) = v.split_once('*').unwrap_or((v, "1"));
                    let peer = normalize_bus_id(peer).ok_or_else(|| bad("bad nvlink peer"))?;
                    let count: usize = count.parse().map_err(|_| bad("bad nvlink count"))?;
                    f.nvlinks.extend(std::iter::repeat_n(peer, count));
                }
                _ => return Err(bad("unknown key")),
            }
        }
        out.push(f);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_key() {
        let v = parse("# c\ngpu 00000000:13:00.0 index=1 cc=9.0 nvswitch=2 nvlink=0000:17:00.0*3 numa=4 name=NVIDIA H100 80GB HBM3\n\ngpu 0000:17:00.0\n").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].bus_id, "0000:13:00.0");
        assert_eq!(v[0].index, Some(1));
        assert_eq!(v[0].compute_capability, Some((9, 0)));
        assert_eq!(v[0].nvlinks.iter().filter(|l| *l == NVSWITCH).count(), 2);
        assert_eq!(v[0].nvlinks.iter().filter(|l| *l == "0000:17:00.0").count(), 3);
        assert_eq!(v[0].gpu_numa_id, Some(4));
        assert_eq!(v[0].name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(v[1], GpuFacts { bus_id: "0000:17:00.0".into(), ..GpuFacts::default() });
        assert!(parse("gpu 0000:13:00.0 colour=red").unwrap_err().contains("line 1"));
        assert!(parse("nic 0000:13:00.0").is_err());
        assert!(parse("gpu zz").is_err());
    }
}
