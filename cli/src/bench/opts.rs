//! Command-line options of the RDMA benchmarks (perftest's flags where they fit) and
//! the resolved parameters both ends of one run agree on.

use anyhow::{bail, Result};

/// Which benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    WriteBw,
    WriteLat,
    ReadBw,
    ReadLat,
    SendBw,
    SendLat,
    AtomicBw,
}

/// The operation a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Write,
    Read,
    Send,
    Atomic,
}

impl Test {
    pub const ALL: [Test; 7] =
        [Test::WriteBw, Test::WriteLat, Test::ReadBw, Test::ReadLat, Test::SendBw, Test::SendLat, Test::AtomicBw];

    /// The subcommand name (also what the out-of-band hello carries).
    pub fn name(self) -> &'static str {
        match self {
            Test::WriteBw => "write-bw",
            Test::WriteLat => "write-lat",
            Test::ReadBw => "read-bw",
            Test::ReadLat => "read-lat",
            Test::SendBw => "send-bw",
            Test::SendLat => "send-lat",
            Test::AtomicBw => "atomic-bw",
        }
    }

    pub fn from_name(s: &str) -> Option<Test> {
        Test::ALL.into_iter().find(|t| t.name() == s)
    }

    pub fn verb(self) -> Verb {
        match self {
            Test::WriteBw | Test::WriteLat => Verb::Write,
            Test::ReadBw | Test::ReadLat => Verb::Read,
            Test::SendBw | Test::SendLat => Verb::Send,
            Test::AtomicBw => Verb::Atomic,
        }
    }

    pub fn is_lat(self) -> bool {
        matches!(self, Test::WriteLat | Test::ReadLat | Test::SendLat)
    }
}

/// Atomic operation of atomic-bw (perftest `-A`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AtomicType {
    #[value(name = "FETCH_AND_ADD")]
    FetchAndAdd,
    #[value(name = "CMP_AND_SWAP")]
    CmpAndSwap,
}

/// Flags shared by every RDMA benchmark. Without a host this end is the server; the
/// server takes the test parameters (size, iterations, QPs, depths, ...) from the
/// client, so only device flags matter on its command line.
#[derive(clap::Args, Debug, Clone)]
pub struct Opts {
    /// Server to connect to (none: act as the server and wait for a client).
    pub host: Option<String>,
    /// TCP port of the out-of-band exchange.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// RDMA device (default: the embedded softhca).
    #[arg(short = 'd', long = "ib-dev")]
    pub dev: Option<String>,
    /// Port of the device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,
    /// GID index (default: the port's IPv4-mapped RoCE v2 GID).
    #[arg(short = 'x', long = "gid-index")]
    pub gid_index: Option<u32>,
    /// Message size in bytes (default 65536 for BW tests, 2 for latency tests).
    #[arg(short = 's', long = "size")]
    pub size: Option<u64>,
    /// Run every size from 2 B to 8 MiB (powers of two).
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Iterations per QP (default 5000 for BW tests, 1000 for latency tests).
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u64>,
    /// Number of QPs.
    #[arg(short = 'q', long = "qp", default_value_t = 1)]
    pub qps: u32,
    /// Send queue depth: work requests kept outstanding per QP (default 128 BW, 1 latency).
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,
    /// Receive queue depth (send tests).
    #[arg(short = 'r', long = "rx-depth")]
    pub rx_depth: Option<u32>,
    /// Largest message sent inline (default 220 write-lat, 236 send-lat, else 0).
    #[arg(short = 'I', long = "inline_size")]
    pub inline: Option<u32>,
    /// Path MTU in bytes (256..4096; default: the port's active MTU).
    #[arg(short = 'm', long = "mtu")]
    pub mtu: Option<u32>,
    /// Run for this many seconds instead of a number of iterations.
    #[arg(short = 'D', long = "duration")]
    pub duration: Option<f64>,
    /// Request a completion every N work requests (BW tests; capped at tx-depth).
    #[arg(short = 'Q', long = "cq-mod", default_value_t = 100)]
    pub cq_mod: u32,
    /// Sleep on a completion channel instead of busy polling.
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Accepted for perftest compatibility and ignored (no CPU frequency is used).
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// Report bandwidth in Gbit/sec instead of MB/sec.
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Atomic operation of atomic-bw.
    #[arg(short = 'A', long = "atomic_type", value_enum)]
    pub atomic_type: Option<AtomicType>,
    /// Fill buffers with a pattern and verify every byte (and every atomic result).
    #[arg(long)]
    pub check: bool,
    /// Carry immediate data: RDMA WRITE with immediate (write-bw) or SEND with immediate
    /// (send-bw, send-lat); the receiver checks every value.
    #[arg(long = "imm")]
    pub imm: bool,
    /// Run both ends from this command: the server is a child process (its own softhca host).
    #[arg(long)]
    pub local: bool,
    /// write-bw: measure single-core memcpy at the same size before and after, print the ratio.
    #[arg(long = "vs-memcpy")]
    pub vs_memcpy: bool,
    /// Put this end's buffers in the memory of GPU N (CUDA ordinal), as perftest's
    /// `--use_cuda=N`: write-bw, read-bw and send-bw. The client also measures cudaMemcpy
    /// H2D and D2H at the same sizes and prints the ratios after the table.
    #[arg(long = "use-cuda", visible_alias = "use_cuda", value_name = "GPU")]
    pub use_cuda: Option<usize>,
    /// As --use-cuda, naming the GPU by its PCI address (`0000:00:06.0`, as perftest's
    /// `--use_cuda_bus_id`).
    #[arg(long = "use-cuda-bus-id", visible_alias = "use_cuda_bus_id", value_name = "BUS", conflicts_with = "use_cuda")]
    pub use_cuda_bus_id: Option<String>,
    /// With --use-cuda: register the GPU buffer through a dma-buf (ibv_reg_dmabuf_mr)
    /// instead of ibv_reg_mr on the device pointer (which needs nvidia-peermem, and which
    /// softhca cannot do).
    #[arg(long = "use-cuda-dmabuf", visible_alias = "use_cuda_dmabuf")]
    pub use_cuda_dmabuf: bool,
    /// Polled mode: this end's benchmark thread also steps the software device's data path
    /// whenever it waits (posted WQEs go out, arrived packets are handled, in this thread),
    /// the way doorbell's collective and NCCL plugin drive softhca; the device's own thread
    /// then sleeps. Fewer threads than cores means no scheduling between poller and device.
    /// No effect on hardware. `--local` passes it to the server.
    #[arg(long)]
    pub polled: bool,
    /// Print the softhca device counters (stderr) after the run; they are printed on
    /// failure anyway.
    #[arg(long)]
    pub counters: bool,
    /// Give up after this many seconds without progress.
    #[arg(long = "timeout", default_value_t = 60)]
    pub timeout: u64,
    /// Print `PORT <n>` on stdout once listening (used by --local with -p 0).
    #[arg(long, hide = true)]
    pub announce_port: bool,
}

/// Parameters both ends of a run use; the client's are sent to the server in the hello.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub test: Test,
    pub sizes: Vec<u64>,
    pub iters: u64,
    pub qps: u32,
    pub tx_depth: u32,
    pub rx_depth: u32,
    pub inline: u32,
    /// `ibv_mtu` code requested (0: the port's active MTU).
    pub mtu: u8,
    /// Seconds (0: run `iters`).
    pub duration: f64,
    pub cq_mod: u32,
    pub check: bool,
    pub atomic: AtomicType,
    /// With immediate data.
    pub imm: bool,
}

/// Largest size of `-a` (8 MiB).
pub const MAX_ALL_SIZE: u64 = 8 << 20;

/// An MTU in bytes as its `ibv_mtu` code.
pub fn mtu_code(bytes: u32) -> Result<u8> {
    Ok(match bytes {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        4096 => 5,
        _ => bail!("invalid MTU {bytes} (256, 512, 1024, 2048 or 4096)"),
    })
}

impl Params {
    /// Resolves the defaults of `test` for the flags given.
    pub fn from_opts(test: Test, o: &Opts) -> Result<Params> {
        let lat = test.is_lat();
        let sizes = if test == Test::AtomicBw {
            vec![8]
        } else if o.all {
            std::iter::successors(Some(2u64), |s| Some(s * 2)).take_while(|&s| s <= MAX_ALL_SIZE).collect()
        } else {
            vec![o.size.unwrap_or(if lat { 2 } else { 65536 })]
        };
        if sizes.iter().any(|&s| s > u32::MAX as u64 / 2) {
            bail!("message size too large");
        }
        if test == Test::WriteLat && sizes.contains(&0) {
            bail!("write-lat needs at least 1 byte (each side polls the last byte of its buffer)");
        }
        let iters = o.iters.unwrap_or(if lat { 1000 } else { 5000 });
        if iters == 0 {
            bail!("iterations must be at least 1");
        }
        if o.qps == 0 || o.qps > 1024 {
            bail!("number of QPs must be 1..1024");
        }
        let tx_depth = if lat { 1 } else { o.tx_depth.unwrap_or(128) };
        let tx_depth = if o.duration.is_none() { tx_depth.min(iters.min(u32::MAX as u64) as u32) } else { tx_depth }.max(1);
        let rx_depth = o.rx_depth.unwrap_or(512).clamp(2, 8192);
        let inline = o.inline.unwrap_or(match test {
            Test::WriteLat => 220,
            Test::SendLat => 236,
            _ => 0,
        });
        if matches!(test.verb(), Verb::Read | Verb::Atomic) && o.inline.is_some_and(|i| i > 0) {
            bail!("{} cannot send inline", test.name());
        }
        let mtu = match o.mtu {
            Some(m) => mtu_code(m)?,
            None => 0,
        };
        let duration = o.duration.unwrap_or(0.0);
        if !(0.0..=86400.0).contains(&duration) {
            bail!("invalid duration");
        }
        if o.imm && !matches!(test, Test::WriteBw | Test::SendBw | Test::SendLat) {
            bail!("--imm is for write-bw, send-bw and send-lat");
        }
        Ok(Params {
            test,
            sizes,
            iters,
            qps: o.qps,
            tx_depth,
            rx_depth,
            inline,
            mtu,
            duration,
            cq_mod: o.cq_mod.clamp(1, tx_depth),
            check: o.check,
            atomic: o.atomic_type.unwrap_or(AtomicType::FetchAndAdd),
            imm: o.imm,
        })
    }

    /// Whether the server consumes receives (SENDs, or WRITEs with immediate).
    pub fn needs_recv(&self) -> bool {
        self.test.verb() == Verb::Send || (self.imm && self.test.verb() == Verb::Write)
    }

    /// The largest message of the run.
    pub fn max_size(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(0)
    }

    /// The hello line's fields (`key=value`, space-separated).
    pub fn encode(&self) -> String {
        let sizes: Vec<String> = self.sizes.iter().map(|s| s.to_string()).collect();
        format!(
            "test={} sizes={} iters={} qps={} tx={} rx={} inline={} mtu={} duration={} cqmod={} check={} atomic={} imm={}",
            self.test.name(),
            sizes.join(","),
            self.iters,
            self.qps,
            self.tx_depth,
            self.rx_depth,
            self.inline,
            self.mtu,
            self.duration,
            self.cq_mod,
            self.check as u8,
            match self.atomic {
                AtomicType::FetchAndAdd => "fa",
                AtomicType::CmpAndSwap => "cs",
            },
            self.imm as u8
        )
    }

    /// Parses [`Params::encode`]'s output.
    pub fn decode(s: &str) -> Result<Params> {
        let mut p = Params {
            test: Test::WriteBw,
            sizes: vec![],
            iters: 0,
            qps: 0,
            tx_depth: 0,
            rx_depth: 0,
            inline: 0,
            mtu: 0,
            duration: 0.0,
            cq_mod: 1,
            check: false,
            atomic: AtomicType::FetchAndAdd,
            imm: false,
        };
        let mut seen = 0;
        for kv in s.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else { bail!("bad field {kv:?}") };
            let num = || v.parse::<u64>().map_err(|_| anyhow::anyhow!("bad number in {kv:?}"));
            match k {
                "test" => p.test = Test::from_name(v).ok_or_else(|| anyhow::anyhow!("unknown test {v:?}"))?,
                "sizes" => {
                    p.sizes = v.split(',').map(|x| x.parse::<u64>()).collect::<Result<_, _>>()?;
                }
                "iters" => p.iters = num()?,
                "qps" => p.qps = num()? as u32,
                "tx" => p.tx_depth = num()? as u32,
                "rx" => p.rx_depth = num()? as u32,
                "inline" => p.inline = num()? as u32,
                "mtu" => p.mtu = num()? as u8,
                "duration" => p.duration = v.parse()?,
                "cqmod" => p.cq_mod = num()? as u32,
                "check" => p.check = num()? != 0,
                "atomic" => p.atomic = if v == "cs" { AtomicType::CmpAndSwap } else { AtomicType::FetchAndAdd },
                "imm" => p.imm = num()? != 0,
                _ => continue, // fields a newer peer adds
            }
            seen += 1;
        }
        if seen < 13 || p.sizes.is_empty() || p.qps == 0 || p.tx_depth == 0 || p.iters == 0 || p.qps > 1024 {
            bail!("incomplete or invalid parameters: {s:?}");
        }
        if p.max_size() > u32::MAX as u64 / 2 || p.rx_depth > 8192 || p.cq_mod == 0 {
            bail!("parameters out of range: {s:?}");
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct T {
        #[command(flatten)]
        o: Opts,
    }

    #[test]
    fn encode_decode_round_trip() {
        for t in Test::ALL {
            let o = T::parse_from(["x", "-s", "4097", "-q", "3", "-n", "7", "--check"]).o;
            let p = Params::from_opts(t, &o).unwrap();
            assert_eq!(Params::decode(&p.encode()).unwrap(), p);
        }
    }

    #[test]
    fn defaults_like_perftest() {
        let o = T::parse_from(["x"]).o;
        let bw = Params::from_opts(Test::WriteBw, &o).unwrap();
        assert_eq!((bw.sizes[0], bw.iters, bw.tx_depth, bw.cq_mod, bw.inline), (65536, 5000, 128, 100, 0));
        let lat = Params::from_opts(Test::WriteLat, &o).unwrap();
        assert_eq!((lat.sizes[0], lat.iters, lat.tx_depth, lat.inline), (2, 1000, 1, 220));
        let all = Params::from_opts(Test::ReadBw, &T::parse_from(["x", "-a"]).o).unwrap();
        assert_eq!((all.sizes.len(), all.sizes[0], *all.sizes.last().unwrap()), (23, 2, 8 << 20));
        assert!(Params::from_opts(Test::WriteLat, &T::parse_from(["x", "-s", "0"]).o).is_err());
    }

    /// perftest spells the GPU flags `--use_cuda=<gpu index>` and `--use_cuda_dmabuf`
    /// (perftest_parameters.c's long options); both spellings parse to the same thing.
    #[test]
    fn cuda_flags_in_both_spellings() {
        for args in [&["x", "--use_cuda=1", "--use_cuda_dmabuf"][..], &["x", "--use-cuda", "1", "--use-cuda-dmabuf"], &["x", "--use_cuda", "1", "--use-cuda-dmabuf"]] {
            let o = T::parse_from(args).o;
            assert_eq!((o.use_cuda, o.use_cuda_dmabuf), (Some(1), true), "{args:?}");
        }
        let o = T::parse_from(["x"]).o;
        assert_eq!((o.use_cuda, o.use_cuda_dmabuf), (None, false));
        assert!(T::try_parse_from(["x", "--use_cuda=-1"]).is_err());
        assert!(T::try_parse_from(["x", "--use_cuda=gpu0"]).is_err());
    }
}
