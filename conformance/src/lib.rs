//! # conformance: one table of uverbs commands, every device gives the same answers
//!
//! [`table::cases`] lists commands (well-formed and malformed) with the result the Linux
//! 6.1 uverbs core gives for each. [`run`] plays the table, in order, on a device opened
//! by the caller (a real `/dev/infiniband/uverbsN`, or softhca in-process) with a
//! [`Profile`] supplying that driver's private data, and returns one [`CaseResult`] per
//! case. The `uverbs-conformance` binary prints them as `case <name> <errno-or-OK>`
//! lines; `tests/rxe_and_softhca.rs` runs it against rxe in the QEMU guest and the same
//! table against softhca, and requires both to match the expectations.
//!
//! Cases share one session: the objects created by earlier cases (PD, MR, CQs, QPs) are
//! what later cases use, break and destroy. Each case reports an errno, OK, or `BAD`
//! when the call succeeded but returned something wrong.

pub mod corpus;
pub mod profile;
pub mod table;
#[cfg(feature = "softhca")]
pub mod softhca_target;

use std::fmt;
use std::os::fd::OwnedFd;

pub use profile::{DriverData, Mlx5Profile, PageBuf, Profile, RxeProfile};
use uverbs::sys::verbs::{GidEntry, QueryPortRespEx};
use uverbs::{Device, Errno};

/// Why a case did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fail {
    /// The device returned this errno.
    Errno(Errno),
    /// The call succeeded but its result was wrong; the text says how.
    Bad(String),
}

impl From<Errno> for Fail {
    fn from(e: Errno) -> Self {
        Fail::Errno(e)
    }
}

/// What one case function returns.
pub type Outcome = std::result::Result<(), Fail>;

/// Fails the case with [`Fail::Bad`] unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond { return Err($crate::Fail::Bad(format!($($fmt)+))); }
    };
}

/// The result a case must produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Ok,
    Errno(Errno),
}

impl Expect {
    /// The label printed in result lines: `OK` or the errno name (`EINVAL`).
    pub fn label(&self) -> String {
        match self {
            Expect::Ok => "OK".into(),
            Expect::Errno(e) => format!("{e:?}"),
        }
    }
}

/// The label of an outcome: `OK`, the errno name, or `BAD`.
pub fn outcome_label(o: &Outcome) -> String {
    match o {
        Ok(()) => "OK".into(),
        Err(Fail::Errno(e)) => format!("{e:?}"),
        Err(Fail::Bad(_)) => "BAD".into(),
    }
}

/// One row of the table.
pub struct Case {
    /// Unique, no spaces; printed in result lines.
    pub name: &'static str,
    /// The expected result: what the uverbs core answers, the same on every device
    /// unless `per_driver` names the device's driver.
    pub expect: Expect,
    /// Drivers (by [`Profile::name`]) whose answer legitimately differs, with theirs: a
    /// driver without the operation (Linux 6.1's rxe has no `reg_user_mr_dmabuf`, so the
    /// core answers EOPNOTSUPP before any check of its own). Empty for almost every row.
    pub per_driver: &'static [(&'static str, Expect)],
    /// What the case checks, for readers of the table and of failure reports.
    pub what: &'static str,
    pub run: fn(&mut Session) -> Outcome,
}

impl Case {
    /// The expectation on a device whose driver profile is `driver` (`rxe`, `mlx5`).
    pub fn expect_for(&self, driver: &str) -> Expect {
        self.per_driver.iter().find(|(d, _)| *d == driver).map(|(_, e)| *e).unwrap_or(self.expect)
    }
}

/// The result of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub name: &'static str,
    pub expect: Expect,
    pub got: Outcome,
}

impl CaseResult {
    /// True when the case produced exactly its expected result.
    pub fn matched(&self) -> bool {
        outcome_label(&self.got) == self.expect.label()
    }
}

impl fmt::Display for CaseResult {
    /// `case <name> <result>`, plus the expectation and any detail on a mismatch.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "case {} {}", self.name, outcome_label(&self.got))?;
        if !self.matched() {
            write!(f, "   # MISMATCH: expected {}", self.expect.label())?;
        }
        if let Err(Fail::Bad(why)) = &self.got {
            write!(f, " ({why})")?;
        }
        Ok(())
    }
}

/// A handle value no device has handed out (handles start at 0 and are reused).
pub const NO_HANDLE: u32 = 0x00ff_fff0;

/// Opens a fresh uverbs file on the device under test.
pub type Opener<'a> = &'a dyn Fn() -> uverbs::Result<Device>;

/// Objects created by earlier cases, for later ones.
#[derive(Debug)]
pub struct Objects {
    pub num_comp_vectors: u32,
    pub async_fd: Option<OwnedFd>,
    pub channel: Option<OwnedFd>,
    pub port: QueryPortRespEx,
    /// The GID used as source and destination of the QP's address vector.
    pub gid: GidEntry,
    pub gids: Vec<GidEntry>,
    pub pd: u32,
    pub pd2: u32,
    pub mr: u32,
    /// The first MR's lkey.
    pub mr_lkey: u32,
    pub mr2: u32,
    pub mr_buf: Option<PageBuf>,
    /// CQ created through ioctl (with the completion channel), and through write().
    pub cq: u32,
    pub cq_w: u32,
    /// RC QPs created through ioctl and through write().
    pub qp: u32,
    pub qpn: u32,
    pub qp_w: u32,
    pub qpn_w: u32,
    /// RC QP created through the extended write().
    pub qp_ex: u32,
    /// A basic SRQ (write CREATE_SRQ) and an RC QP receiving from it.
    pub srq: u32,
    pub qp_srq: u32,
    /// A CPU-mappable dma-buf (vgem) and its size, for the dma-buf rows.
    pub dmabuf: Option<(OwnedFd, u64)>,
}

impl Default for Objects {
    fn default() -> Self {
        Objects {
            num_comp_vectors: 0,
            async_fd: None,
            channel: None,
            port: QueryPortRespEx::default(),
            gid: GidEntry::default(),
            gids: Vec::new(),
            pd: NO_HANDLE,
            pd2: NO_HANDLE,
            mr: NO_HANDLE,
            mr_lkey: 0,
            mr2: NO_HANDLE,
            mr_buf: None,
            cq: NO_HANDLE,
            cq_w: NO_HANDLE,
            qp: NO_HANDLE,
            qpn: 0,
            qp_w: NO_HANDLE,
            qpn_w: 0,
            qp_ex: NO_HANDLE,
            srq: NO_HANDLE,
            qp_srq: NO_HANDLE,
            dmabuf: None,
        }
    }
}

/// The state a run threads through the cases.
pub struct Session<'a> {
    open: Opener<'a>,
    dev: Option<Device>,
    pub profile: &'a dyn Profile,
    pub obj: Objects,
    /// Driver buffers of created objects; freed at the end of the run.
    keep: Vec<PageBuf>,
}

impl<'a> Session<'a> {
    /// The current uverbs file. Panics only if [`Session::reopen`] failed earlier, in
    /// which case that case already reported the failure.
    pub fn dev(&self) -> &Device {
        self.dev.as_ref().expect("no open device (reopen failed)")
    }

    /// The current uverbs file, mutably (to change the driver id it sends).
    pub fn dev_mut(&mut self) -> &mut Device {
        self.dev.as_mut().expect("no open device (reopen failed)")
    }

    /// Closes the current uverbs file (destroying everything on it) and opens a new one
    /// without a context.
    pub fn reopen(&mut self) -> uverbs::Result<()> {
        self.dev = None;
        self.dev = Some((self.open)()?);
        Ok(())
    }

    /// Driver data for a CQ of `cqe` entries; its buffers live until the run ends.
    pub fn cq_udata(&mut self, cqe: u32) -> DriverData {
        let mut d = self.profile.cq(cqe);
        self.keep.append(&mut d.keep);
        d
    }

    /// Driver data for a basic SRQ; its buffers live until the run ends.
    pub fn srq_udata(&mut self, max_wr: u32, max_sge: u32) -> DriverData {
        let mut d = self.profile.srq(max_wr, max_sge);
        self.keep.append(&mut d.keep);
        d
    }

    /// Driver data for an RC QP; its buffers live until the run ends.
    pub fn qp_udata(&mut self, cap: &uverbs::sys::verbs::QpCap) -> DriverData {
        let mut d = self.profile.qp(cap);
        self.keep.append(&mut d.keep);
        d
    }

    /// `write()` of raw command bytes.
    pub fn write_bytes(&self, bytes: &[u8]) -> uverbs::Result<usize> {
        // SAFETY: callers pass either no response pointer, a pointer to a live buffer
        // of the announced size, or a deliberately invalid address that the device
        // must reject with EFAULT (its checked copies never dereference it).
        unsafe { self.dev().write_raw(bytes) }
    }
}

/// Plays the whole table on a device: `open` gives a fresh uverbs file each time the
/// table needs one (the first case uses the first). Returns one result per case, in
/// table order.
pub fn run(open: Opener<'_>, profile: &dyn Profile) -> Vec<CaseResult> {
    run_cases(&table::cases(), open, profile)
}

/// Plays `cases` in order (see [`run`]).
pub fn run_cases(cases: &[Case], open: Opener<'_>, profile: &dyn Profile) -> Vec<CaseResult> {
    let (dev, open_err) = match open() {
        Ok(d) => (Some(d), None),
        Err(e) => (None, Some(e)),
    };
    let mut s = Session { open, dev, profile, obj: Objects::default(), keep: Vec::new() };
    let mut out = Vec::with_capacity(cases.len());
    for c in cases {
        let got = if s.dev.is_none() {
            Err(Fail::Bad(format!("no open device (open: {open_err:?})")))
        } else {
            (c.run)(&mut s)
        };
        out.push(CaseResult { name: c.name, expect: c.expect_for(profile.name()), got });
    }
    // Close the file (destroying what is left) before the buffers it points at go.
    s.dev = None;
    s.obj = Objects::default();
    drop(s.keep);
    out
}

/// Checks what `uverbs::discovery` finds for a kernel device `name`: the sysfs entry,
/// its uverbs node, the driver id, and that the node's `dev` numbers are the ones the
/// character device really has (`st_rdev`).
pub fn check_discovery(name: &str) -> Outcome {
    let list = uverbs::discovery::list();
    let Some(info) = list.iter().find(|d| d.name == name) else {
        return Err(Fail::Bad(format!("{name} not in discovery::list() ({} devices)", list.len())));
    };
    ensure!(info.uverbs.starts_with("uverbs"), "uverbs node {:?}", info.uverbs);
    ensure!(info.dev_path == std::path::Path::new("/dev/infiniband").join(&info.uverbs),
            "dev_path {:?} for node {}", info.dev_path, info.uverbs);
    let st = nix::sys::stat::stat(&info.dev_path).map_err(Fail::Errno)?;
    let (maj, min) = (libc::major(st.st_rdev), libc::minor(st.st_rdev));
    ensure!(st.st_mode & libc::S_IFMT == libc::S_IFCHR, "{:?} is not a character device", info.dev_path);
    ensure!((maj, min) == info.devnum, "sysfs dev {:?} but st_rdev {}:{}", info.devnum, maj, min);
    ensure!(info.node_type.starts_with("1:"), "node_type {:?}", info.node_type);
    let want = if name.starts_with("rxe") { uverbs::sys::verbs::RDMA_DRIVER_RXE } else { uverbs::sys::verbs::RDMA_DRIVER_MLX5 };
    ensure!(info.driver_id() == want, "driver {:?} -> id {}", info.driver, info.driver_id());
    ensure!(info.abi_version >= 1, "abi_version {}", info.abi_version);
    // And the device opens through discovery.
    uverbs::discovery::open(name).map_err(Fail::Errno)?;
    Ok(())
}

/// Parses `case <name> <result>` lines (other lines are ignored) into (name, result).
pub fn parse_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "case").then_some(())?;
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect()
}

/// Compares parsed result lines of a device whose driver profile is `driver` with the
/// table's expectations for it; returns one message per problem (missing, unexpected or
/// mismatched case). Empty means all matched.
pub fn compare(lines: &[(String, String)], cases: &[Case], driver: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for c in cases {
        let want = c.expect_for(driver).label();
        match lines.iter().find(|(n, _)| n == c.name) {
            None => problems.push(format!("{}: no result line", c.name)),
            Some((_, got)) if *got != want => {
                problems.push(format!("{}: got {got}, expected {want} on {driver} ({})", c.name, c.what))
            }
            Some(_) => {}
        }
    }
    for (n, _) in lines {
        if !cases.iter().any(|c| c.name == n) && !n.starts_with("discovery") {
            problems.push(format!("{n}: not in the table"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_roundtrip_through_the_parser() {
        let ok = CaseResult { name: "a", expect: Expect::Ok, got: Ok(()) };
        let bad = CaseResult { name: "b", expect: Expect::Errno(Errno::EINVAL), got: Err(Fail::Errno(Errno::ENOENT)) };
        let text = format!("noise\n{ok}\n{bad}\n");
        assert_eq!(bad.to_string(), "case b ENOENT   # MISMATCH: expected EINVAL");
        let p = parse_lines(&text);
        assert_eq!(p, vec![("a".into(), "OK".into()), ("b".into(), "ENOENT".into())]);
    }

    #[test]
    fn compare_reports_mismatch_missing_and_extra() {
        fn nop(_: &mut Session) -> Outcome {
            Ok(())
        }
        let cases = [
            Case { name: "x", expect: Expect::Ok, per_driver: &[], what: "", run: nop },
            Case { name: "y", expect: Expect::Errno(Errno::EBUSY), per_driver: &[], what: "", run: nop },
            Case { name: "z", expect: Expect::Ok, per_driver: &[("rxe", Expect::Errno(Errno::EOPNOTSUPP))], what: "", run: nop },
        ];
        let lines = vec![("x".into(), "OK".into()), ("y".into(), "EINVAL".into()), ("w".into(), "OK".into())];
        let p = compare(&lines, &cases, "mlx5");
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].starts_with("y: got EINVAL, expected EBUSY on mlx5"));
        assert!(p[1].starts_with("z: no result line"));
        assert!(p[2].starts_with("w: not in the table"));
        let all = vec![("x".into(), "OK".into()), ("y".into(), "EBUSY".into()), ("z".into(), "OK".into())];
        assert!(compare(&all, &cases, "mlx5").is_empty());
        // A per-driver expectation applies to that driver only.
        let p = compare(&all, &cases, "rxe");
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("z: got OK, expected EOPNOTSUPP on rxe"), "{p:?}");
        let rxe = vec![("x".into(), "OK".into()), ("y".into(), "EBUSY".into()), ("z".into(), "EOPNOTSUPP".into())];
        assert!(compare(&rxe, &cases, "rxe").is_empty());
    }

    #[test]
    fn table_names_are_unique_and_printable() {
        let cases = table::cases();
        assert!(cases.len() > 50);
        let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
        assert!(names.iter().all(|n| !n.is_empty() && !n.contains(char::is_whitespace)));
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate case names");
    }
}
