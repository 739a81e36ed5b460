//! The differential corpus: mutated uverbs commands kept in the tree
//! (`conformance/corpus/uverbs.txt`), each with the errno Linux 6.1 (rxe in the QEMU guest)
//! answered, replayed on every device so a regression shows as a changed answer.
//!
//! Only driver-independent commands: every entry runs on a fresh uverbs file without a
//! context, so what answers is the uverbs core's framework (header, method lookup,
//! attribute processing, the context check) and never a driver. The header's
//! `driver_id` is stored relative to the device's (0: the device's own), so the same
//! entry means the same thing on rxe and on mlx5/softhca.
//!
//! Memory safety of a replay against a real kernel: the kernel writes where pointer
//! attributes point. Each entry lists the words of its image that are pointers
//! (`reloc=`); they hold offsets into a scratch area and are relocated into it before the
//! call. Every other word that could be taken as a pointer holds a small value (below
//! 64 KiB), unmapped low memory, so a mutated length or type can only give EFAULT.
//!
//! Line format: `NAME EXPECT ioctl|write HEX [reloc=OFF,...]`, `#` comments.

use std::fmt::Write as _;

use uverbs::{Device, Errno};

use crate::PageBuf;

/// Bytes of the scratch area pointer attributes point into: more than the longest
/// length an attribute can announce (u16).
const SCRATCH: usize = 128 << 10;

/// How an entry reaches the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Ioctl,
    Write,
}

/// One corpus line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    /// `OK` or the errno name Linux answered; `?` in a freshly generated corpus.
    pub expect: String,
    pub kind: Kind,
    pub bytes: Vec<u8>,
    /// Offsets of 8-byte words holding scratch offsets (relocated before the call).
    pub reloc: Vec<usize>,
}

impl Entry {
    /// The entry as one corpus line.
    pub fn line(&self) -> String {
        let mut hex = String::with_capacity(2 * self.bytes.len());
        for b in &self.bytes {
            let _ = write!(hex, "{b:02x}");
        }
        let kind = match self.kind { Kind::Ioctl => "ioctl", Kind::Write => "write" };
        let reloc = if self.reloc.is_empty() {
            String::new()
        } else {
            format!(" reloc={}", self.reloc.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(","))
        };
        format!("{} {} {kind} {hex}{reloc}", self.name, self.expect)
    }
}

/// Parses a corpus file; the error names the line.
pub fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("corpus line {}: {why}: {line}", n + 1);
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 4 || w.len() > 5 {
            return Err(bad("expected NAME EXPECT KIND HEX [reloc=...]"));
        }
        let kind = match w[2] { "ioctl" => Kind::Ioctl, "write" => Kind::Write, _ => return Err(bad("kind is ioctl or write")) };
        if w[3].len() % 2 != 0 {
            return Err(bad("odd hex length"));
        }
        let bytes = (0..w[3].len()).step_by(2)
            .map(|i| u8::from_str_radix(&w[3][i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>().map_err(|_| bad("bad hex"))?;
        let reloc = match w.get(4) {
            None => Vec::new(),
            Some(r) => r.strip_prefix("reloc=").ok_or_else(|| bad("fifth field is reloc="))?
                .split(',').map(|o| o.parse::<usize>()).collect::<Result<Vec<_>, _>>().map_err(|_| bad("bad reloc"))?,
        };
        if reloc.iter().any(|&o| o + 8 > bytes.len()) || (kind == Kind::Ioctl && bytes.len() < 24) {
            return Err(bad("reloc past the image, or an ioctl image shorter than its header"));
        }
        out.push(Entry { name: w[0].to_string(), expect: w[1].to_string(), kind, bytes, reloc });
    }
    Ok(out)
}

/// Plays each entry on a fresh file from `open`; returns (name, `OK` or errno name).
pub fn replay(entries: &[Entry], open: crate::Opener<'_>) -> Vec<(String, String)> {
    let mut scratch = PageBuf::new(SCRATCH);
    let mut image = PageBuf::new(1 << 16);
    entries.iter().map(|e| {
        let label = match open() {
            Err(err) => format!("open:{err:?}"),
            Ok(dev) => label(play(&dev, e, &mut scratch, &mut image)),
        };
        (e.name.clone(), label)
    }).collect()
}

fn label(r: Result<(), Errno>) -> String {
    match r {
        Ok(()) => "OK".into(),
        Err(e) => format!("{e:?}"),
    }
}

fn play(dev: &Device, e: &Entry, scratch: &mut PageBuf, image: &mut PageBuf) -> Result<(), Errno> {
    scratch.bytes_mut().fill(0);
    let mut b = e.bytes.clone();
    for &o in &e.reloc {
        let off = u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        b[o..o + 8].copy_from_slice(&(scratch.addr() + off % SCRATCH as u64).to_ne_bytes());
    }
    match e.kind {
        Kind::Ioctl => {
            let d = u32::from_ne_bytes(b[16..20].try_into().unwrap());
            b[16..20].copy_from_slice(&dev.driver_id().wrapping_add(d).to_ne_bytes());
            // The header may announce more attributes than the image holds (up to a
            // page): the rest of the image buffer is zeros.
            let img = image.bytes_mut();
            img.fill(0);
            img[..b.len()].copy_from_slice(&b);
            // SAFETY: the image buffer is 64 KiB, more than any header length (u16) the
            // kernel reads; every pointer the entry holds was relocated into `scratch`
            // (128 KiB, more than any attribute length) or is a small value in unmapped
            // low memory (module docs), so the device writes nowhere else.
            unsafe { dev.ioctl_raw(img.as_mut_ptr().cast()) }
        }
        Kind::Write => {
            // SAFETY: as above: the response pointer was relocated into `scratch`, which
            // holds any size a header can announce (u16 words).
            unsafe { dev.write_raw(&b) }.map(|_| ())
        }
    }
}

/// A small deterministic generator (xorshift64*), so the corpus needs no RNG crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An ioctl image under construction: header, then (id, len, flags, reserved, data,
/// data-is-a-scratch-pointer) attributes.
#[derive(Clone)]
struct Img {
    object: u16,
    method: u16,
    attrs: Vec<(u16, u16, u16, u16, u64, bool)>,
    /// Header overrides: (length, num_attrs) when set, reserved1, driver_id delta, reserved2.
    len_num: Option<(u16, u16)>,
    reserved1: u64,
    driver_delta: u32,
    reserved2: u32,
}

impl Img {
    fn new(object: u16, method: u16) -> Img {
        Img { object, method, attrs: Vec::new(), len_num: None, reserved1: 0, driver_delta: 0, reserved2: 0 }
    }
    fn attr(mut self, id: u16, len: u16, flags: u16, data: u64, ptr: bool) -> Img {
        self.attrs.push((id, len, flags, 0, data, ptr));
        self
    }
    fn entry(&self, name: String) -> Entry {
        let n = self.attrs.len() as u16;
        let (length, num) = self.len_num.unwrap_or((24 + 16 * n, n));
        let mut b = Vec::new();
        for v in [length, self.object, self.method, num] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&self.reserved1.to_ne_bytes());
        b.extend_from_slice(&self.driver_delta.to_ne_bytes());
        b.extend_from_slice(&self.reserved2.to_ne_bytes());
        let mut reloc = Vec::new();
        for &(id, len, flags, res, data, ptr) in &self.attrs {
            for v in [id, len, flags, res] {
                b.extend_from_slice(&v.to_ne_bytes());
            }
            if ptr {
                reloc.push(b.len());
            }
            b.extend_from_slice(&data.to_ne_bytes());
        }
        Entry { name, expect: "?".into(), kind: Kind::Ioctl, bytes: b, reloc }
    }
}

/// The corpus commands before mutation: (name, image). Methods any device has, with
/// their mandatory attributes; none can succeed without a context. No driver-specific
/// ids (0x1000 and up: mlx5 adds attributes and objects there, rxe none).
fn bases() -> Vec<(&'static str, Img)> {
    const M: u16 = uverbs::sys::ioctl::UVERBS_ATTR_F_MANDATORY;
    vec![
        // QUERY_PORT: port 1 (inline), response (pointer).
        ("query_port", Img::new(0, 2).attr(0, 1, M, 1, false).attr(1, 48, M, 0, true)),
        // QUERY_CONTEXT: the two outputs.
        ("query_context", Img::new(0, 4).attr(0, 8, M, 0x100, true).attr(1, 8, M, 0x200, true)),
        // QUERY_GID_ENTRY: port, index, flags, response.
        ("query_gid_entry", Img::new(0, 6).attr(0, 4, M, 1, false).attr(1, 4, M, 0, false).attr(2, 4, M, 0, false).attr(3, 32, M, 0x300, true)),
        // PD_DESTROY with handle 0; CQ_DESTROY with handle 0 and its response.
        ("pd_destroy", Img::new(1, 0).attr(0, 0, M, 0, false)),
        ("cq_destroy", Img::new(3, 1).attr(0, 0, M, 0, false).attr(1, 8, M, 0x400, true)),
    ]
}

/// Generates the corpus: each base once unchanged, then `per_base` mutants of each
/// (1 to 3 mutations: header fields, attribute ids, lengths, flags, reserved fields,
/// handles, duplicated and dropped attributes), then mutated write() headers.
pub fn generate(seed: u64, per_base: usize) -> Vec<Entry> {
    let mut r = Rng(seed | 1);
    let mut out = Vec::new();
    for (name, base) in bases() {
        out.push(base.entry(format!("{name}-base")));
        for k in 0..per_base {
            let mut m = base.clone();
            for _ in 0..1 + r.below(3) {
                let n = m.attrs.len();
                match r.below(12) {
                    0 => m.len_num = Some(((24 + 16 * n as u64 + 16 * r.below(3)) as u16 ^ (r.below(2) as u16 * 8), n as u16)),
                    1 => m.len_num = Some((24 + 16 * 255, 255)),
                    2 => m.reserved1 = 1 << r.below(64),
                    3 => m.reserved2 = 1 << r.below(32),
                    4 => m.driver_delta = 1 + r.below(3) as u32,
                    5 => m.method = r.below(12) as u16,
                    6 => m.object = [0, 1, 3, 4, 7, 0x77][r.below(6) as usize],
                    7 if n > 0 => m.attrs[r.below(n as u64) as usize].0 = [0, 1, 2, 3, 4, 0x55][r.below(6) as usize],
                    8 if n > 0 => {
                        let i = r.below(n as u64) as usize;
                        // A pointer attribute keeps lengths within the scratch area.
                        m.attrs[i].1 = [0, 1, 2, 4, 7, 8, 9, 16, 47, 49, 300][r.below(11) as usize];
                    }
                    9 if n > 0 => {
                        let i = r.below(n as u64) as usize;
                        if r.below(2) == 0 { m.attrs[i].2 ^= 1 << r.below(3) } else { m.attrs[i].3 = 1 + r.below(3) as u16 }
                    }
                    10 if n > 0 => {
                        let i = r.below(n as u64) as usize;
                        if r.below(2) == 0 { m.attrs.push(m.attrs[i]) } else { m.attrs.remove(i); }
                    }
                    11 if n > 0 => {
                        // A handle or inline value: small, never a live pointer.
                        let i = r.below(n as u64) as usize;
                        if !m.attrs[i].5 {
                            m.attrs[i].4 = [0, 1, 2, 7, 0xfff0, 0xffff][r.below(6) as usize];
                        }
                    }
                    _ => {}
                }
            }
            out.push(m.entry(format!("{name}-m{k}")));
        }
    }
    // write(): legacy ALLOC_PD (3: header, response pointer), QUERY_DEVICE (1) and an
    // extended QUERY_DEVICE, with mutated headers.
    for k in 0..per_base {
        let cmd: u32 = match r.below(6) {
            0 => 3,
            1 => 1,
            2 => r.below(64) as u32,
            // Extended commands below 27 or past 57 only: the write table's length is
            // per device (uapi_finalize counts the commands the driver implements, so
            // rxe's ends after MODIFY_QP, 26, and mlx5's after MODIFY_CQ, 57), and an
            // index between answers EOPNOTSUPP on rxe but the stub's EINVAL on mlx5.
            3 => 0x8000_0000 | if r.below(2) == 0 { r.below(27) } else { 58 + r.below(8) } as u32,
            4 => 0x100 | r.below(4) as u32,
            _ => 0x4000_0003,
        };
        let in_words: u16 = [2, 4, 6, 1, 0, 3][r.below(6) as usize];
        let out_words: u16 = [0, 2, 4, 80][r.below(4) as usize];
        let mut b = Vec::new();
        b.extend_from_slice(&cmd.to_ne_bytes());
        b.extend_from_slice(&in_words.to_ne_bytes());
        b.extend_from_slice(&out_words.to_ne_bytes());
        let body_words = r.below(5) as usize;
        let mut reloc = Vec::new();
        for w in 0..body_words {
            if w == 0 {
                reloc.push(b.len());
                b.extend_from_slice(&0x500u64.to_ne_bytes());
            } else {
                b.extend_from_slice(&[0u8; 8]);
            }
        }
        out.push(Entry { name: format!("write-m{k}"), expect: "?".into(), kind: Kind::Write, bytes: b, reloc });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_through_the_parser() {
        let all = generate(7, 20);
        let text: Vec<String> = all.iter().map(Entry::line).collect();
        assert_eq!(parse(&text.join("\n")).unwrap(), all);
        assert!(parse("a b c").is_err());
        assert!(parse("a OK ioctl 00 reloc=x").is_err());
    }

    #[test]
    fn the_tree_corpus_parses_and_is_whole() {
        let text = include_str!("../corpus/uverbs.txt");
        let all = parse(text).unwrap();
        assert!(all.len() >= 100, "{} entries", all.len());
        assert!(all.iter().all(|e| e.expect != "?"), "entries without an expectation (run --corpus-record in the guest)");
        let mut names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len(), "duplicate names");
    }
}
