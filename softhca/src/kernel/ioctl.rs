//! `RDMA_VERBS_IOCTL`: the header, the attribute array, and the per-method attribute
//! specs (`uverbs_ioctl.c`).
//!
//! Checks run in the kernel's order (docs/notes/kernel-6.1-uverbs.md §1.1): header copy (EFAULT), length
//! (EINVAL), reserved fields (EPROTONOSUPPORT), driver id (EINVAL), method lookup
//! (EPROTONOSUPPORT), attribute array copy (EFAULT), each attribute in array order
//! (§1.2), missing mandatory attributes (EINVAL), the destroy of a DESTROY attribute
//! (EBUSY ...), then the handler. New object handles and fds are written into the
//! caller's attribute array while attributes are processed; every output the kernel
//! fills gets `UVERBS_ATTR_F_VALID_OUTPUT` in its flags.

use std::collections::BTreeMap;
use std::os::fd::{IntoRawFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::{FromBytes, IntoBytes};

use uverbs::sys::ids::{UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT};
use uverbs::sys::ioctl::UVERBS_ATTR_F_MANDATORY;
use uverbs::sys::verbs::RDMA_DRIVER_MLX5;
use uverbs::sys::{IoctlAttr, IoctlHdr};

use crate::hca::Hca;
use crate::uaccess::{copy_from_user, copy_to_user};

use super::udata::{InBuf, OutBuf, Udata};
use super::uobject::{FdObj, ObjType, Uobj};
use super::{methods, FileState, Result, Why};

/// `PAGE_SIZE`: the largest ioctl header + attribute array.
const MAX_LEN: usize = 4096;
const HDR_LEN: usize = std::mem::size_of::<IoctlHdr>();
const ATTR_LEN: usize = std::mem::size_of::<IoctlAttr>();

/// How an IDR/FD attribute uses its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    New,
    Destroy,
}

/// Kind of fd object an FD attribute names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FdType {
    CompChannel,
    AsyncEvent,
    /// `MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD`.
    DevxAsyncCmd,
}

/// The spec of one attribute (`struct uverbs_attr_spec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spec {
    /// Input bytes: at least `min`, at most `len` unless `zero_trailing`, in which case
    /// longer input must be zero past `len`.
    PtrIn { min: u16, len: u16, zero_trailing: bool },
    /// `UVERBS_ATTR_MIN_SIZE(min)` input with `UA_ALLOC_AND_COPY`: the kernel copies
    /// a non-inline value (more than 8 bytes) while processing the attribute, so an
    /// unreadable pointer is EFAULT there, before later attributes and the handler.
    PtrInCopied { min: u16 },
    /// Output buffer: at least `min`; at most `len` unless `zero_trailing`.
    PtrOut { min: u16, len: u16, zero_trailing: bool },
    Idr { ty: ObjType, access: Access },
    Fd { ty: FdType, access: Access },
    /// `UVERBS_ATTR_ENUM_IN`: `attr_data.enum_data.elem_id` picks one of `elems`
    /// (`PtrIn` specs), against which the data is checked.
    EnumIn { elems: &'static [Spec] },
    /// `UVERBS_ATTR_IDRS_ARR`: `min..=max` u32 handles of `ty`, each looked up for
    /// reading.
    IdrsArr { ty: ObjType, min: u16, max: u16 },
}

/// `UVERBS_ATTR_TYPE(T)` input: exactly `n` bytes.
pub(crate) const fn in_type(n: u16) -> Spec {
    Spec::PtrIn { min: n, len: n, zero_trailing: false }
}
/// `UVERBS_ATTR_STRUCT(T, last)` input: at least `min`, zero past `len`.
pub(crate) const fn in_struct(min: u16, len: u16) -> Spec {
    Spec::PtrIn { min, len, zero_trailing: true }
}
/// `UVERBS_ATTR_MIN_SIZE(n)` input.
pub(crate) const fn in_min(n: u16) -> Spec {
    Spec::PtrIn { min: n, len: u16::MAX, zero_trailing: false }
}
/// `UVERBS_ATTR_MIN_SIZE(n)` input, `UA_ALLOC_AND_COPY`.
pub(crate) const fn in_min_copied(n: u16) -> Spec {
    Spec::PtrInCopied { min: n }
}
/// `UVERBS_ATTR_CONST_IN`: exactly 8 bytes, the value inline.
pub(crate) const CONST_IN: Spec = in_type(8);
/// `UVERBS_ATTR_FLAGS_IN`: 4 to 8 bytes (only 4 and 8 are usable).
pub(crate) const FLAGS_IN: Spec = Spec::PtrIn { min: 4, len: 8, zero_trailing: false };
/// `UVERBS_ATTR_TYPE(T)` output: exactly `n` bytes.
pub(crate) const fn out_type(n: u16) -> Spec {
    Spec::PtrOut { min: n, len: n, zero_trailing: false }
}
/// `UVERBS_ATTR_STRUCT(T, last)` output: at least `min`, any length above.
pub(crate) const fn out_struct(min: u16) -> Spec {
    Spec::PtrOut { min, len: u16::MAX, zero_trailing: true }
}
/// `UVERBS_ATTR_MIN_SIZE(n)` output.
pub(crate) const fn out_min(n: u16) -> Spec {
    Spec::PtrOut { min: n, len: u16::MAX, zero_trailing: false }
}
pub(crate) const fn idr(ty: ObjType, access: Access) -> Spec {
    Spec::Idr { ty, access }
}
pub(crate) const fn fd(ty: FdType, access: Access) -> Spec {
    Spec::Fd { ty, access }
}

/// `UVERBS_ATTR_NO_DATA()` input (an enum element without data).
pub(crate) const NO_DATA: Spec = in_type(0);
/// `UVERBS_ATTR_ENUM_IN` of `elems`.
pub(crate) const fn enum_in(elems: &'static [Spec]) -> Spec {
    Spec::EnumIn { elems }
}
/// `UVERBS_ATTR_IDRS_ARR` of `min..=max` handles of `ty` (read access).
pub(crate) const fn idrs_arr(ty: ObjType, min: u16, max: u16) -> Spec {
    Spec::IdrsArr { ty, min, max }
}

/// One attribute of a method.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttrDef {
    pub id: u16,
    pub spec: Spec,
    pub mandatory: bool,
}

/// A mandatory attribute.
pub(crate) const fn m(id: u16, spec: Spec) -> AttrDef {
    AttrDef { id, spec, mandatory: true }
}
/// An optional attribute.
pub(crate) const fn o(id: u16, spec: Spec) -> AttrDef {
    AttrDef { id, spec, mandatory: false }
}

/// A method handler.
pub(crate) type Handler = fn(&mut Call<'_>) -> Result<()>;

/// One ioctl method (`DECLARE_UVERBS_NAMED_METHOD`).
#[derive(Debug)]
pub(crate) struct MethodDef {
    pub object: u16,
    pub method: u16,
    pub attrs: &'static [AttrDef],
    /// Takes driver data (`UVERBS_ATTR_UHW()`): UHW_IN/UHW_OUT are accepted.
    pub udata: bool,
    pub handler: Handler,
}

const UHW_ATTRS: [AttrDef; 2] = [o(UVERBS_ATTR_UHW_IN, in_min(0)), o(UVERBS_ATTR_UHW_OUT, out_min(0))];

impl MethodDef {
    fn attr(&self, id: u16) -> Option<&AttrDef> {
        self.attrs.iter().find(|a| a.id == id)
            .or_else(|| if self.udata { UHW_ATTRS.iter().find(|a| a.id == id) } else { None })
    }

    fn destroy_attr(&self) -> Option<u16> {
        self.attrs.iter().find(|a| matches!(a.spec, Spec::Idr { access: Access::Destroy, .. })).map(|a| a.id)
    }
}

/// A new fd object made while processing its attribute, committed with the call.
#[derive(Debug)]
pub(crate) struct NewFd {
    pub obj: FdObj,
    /// The application's end; its number was written into the attribute.
    pub app: OwnedFd,
}

/// What processing resolved an IDR/FD attribute to.
#[derive(Debug)]
pub(crate) enum Resolved {
    Obj(Uobj),
    Objs(Vec<Uobj>),
    Destroy(u32),
    NewIdr(u32),
    Fd(FdObj),
    NewFd(NewFd),
}

/// A processed attribute.
#[derive(Debug)]
pub(crate) struct AttrVal {
    pub idx: usize,
    pub uattr: IoctlAttr,
    pub res: Option<Resolved>,
}

/// The processed attributes of one call (`struct uverbs_attr_bundle`).
#[derive(Debug, Default)]
pub(crate) struct Bundle {
    /// Address of the caller's attribute array.
    pub user_attrs: u64,
    pub attrs: BTreeMap<u16, AttrVal>,
}

impl Bundle {
    pub(crate) fn is_valid(&self, id: u16) -> bool {
        self.attrs.contains_key(&id)
    }

    /// The element an enum attribute chose (`uverbs_attr_get_enum_id`).
    pub(crate) fn enum_id(&self, id: u16) -> Option<u8> {
        self.attrs.get(&id).map(|a| a.uattr.elem_id)
    }

    /// The objects of an IDRS_ARR attribute (`uverbs_attr_get_uobjs_arr`); none when absent.
    pub(crate) fn objs(&self, id: u16) -> &[Uobj] {
        match self.attrs.get(&id).and_then(|a| a.res.as_ref()) {
            Some(Resolved::Objs(v)) => v,
            _ => &[],
        }
    }

    /// The input of a pointer attribute.
    pub(crate) fn in_buf(&self, id: u16) -> Option<InBuf> {
        let a = self.attrs.get(&id)?;
        let len = a.uattr.len as usize;
        Some(if len <= 8 {
            InBuf::Inline { bytes: a.uattr.data.to_ne_bytes(), len }
        } else {
            InBuf::User { addr: a.uattr.data, len }
        })
    }

    /// The output buffer of a pointer attribute.
    pub(crate) fn out_buf(&self, id: u16) -> Option<OutBuf> {
        let a = self.attrs.get(&id)?;
        let flags_addr = self.user_attrs.wrapping_add((a.idx * ATTR_LEN) as u64 + 4);
        Some(OutBuf { addr: a.uattr.data, len: a.uattr.len as usize, valid_flag: Some((flags_addr, a.uattr.flags)) })
    }

    /// `uverbs_copy_from`: the attribute's bytes into a `T` (ENOENT when absent, EINVAL
    /// when longer than `T`).
    pub(crate) fn copy_from<T: FromBytes + IntoBytes>(&self, id: u16) -> Result<T> {
        let b = self.in_buf(id).ok_or(Errno::ENOENT)?;
        if b.len() > std::mem::size_of::<T>() {
            return Err(Errno::EINVAL);
        }
        b.read_prefix()
    }

    /// `uverbs_copy_from_or_zero`: up to `size_of T` bytes, zero-extended.
    pub(crate) fn copy_from_or_zero<T: FromBytes + IntoBytes>(&self, id: u16) -> Result<T> {
        let b = self.in_buf(id).ok_or(Errno::ENOENT)?;
        b.read_prefix()
    }

    /// `uverbs_get_const`: the inline value (ENOENT when absent, EINVAL above `max`).
    pub(crate) fn get_const(&self, id: u16, max: u64) -> Result<u64> {
        let v = self.attrs.get(&id).ok_or(Errno::ENOENT)?.uattr.data;
        if v > max {
            return Err(Errno::EINVAL);
        }
        Ok(v)
    }

    /// `uverbs_get_flags64`: 0 when absent; the value must be 4 or 8 bytes and use only
    /// `allowed` bits.
    pub(crate) fn get_flags64(&self, id: u16, allowed: u64) -> Result<u64> {
        let Some(a) = self.attrs.get(&id) else { return Ok(0) };
        let v = match a.uattr.len {
            8 => a.uattr.data,
            4 => a.uattr.data & 0xffff_ffff,
            _ => return Err(Errno::EINVAL),
        };
        if v & !allowed != 0 {
            return Err(Errno::EINVAL);
        }
        Ok(v)
    }

    /// `uverbs_get_flags32`.
    pub(crate) fn get_flags32(&self, id: u16, allowed: u64) -> Result<u32> {
        let v = self.get_flags64(id, allowed)?;
        u32::try_from(v).map_err(|_| Errno::EINVAL)
    }

    /// `uverbs_copy_to` (ENOENT when the output is absent).
    pub(crate) fn copy_to(&self, id: u16, data: &[u8]) -> Result<()> {
        self.out_buf(id).ok_or(Errno::ENOENT)?.copy_to(data)
    }

    /// `uverbs_copy_to` where a missing optional output is fine (`IS_UVERBS_COPY_ERR`).
    pub(crate) fn copy_to_opt(&self, id: u16, data: &[u8]) -> Result<()> {
        match self.copy_to(id, data) {
            Err(Errno::ENOENT) => Ok(()),
            r => r,
        }
    }

    /// `uverbs_copy_to_struct_or_zero`.
    pub(crate) fn copy_to_struct_or_zero(&self, id: u16, data: &[u8]) -> Result<()> {
        self.out_buf(id).ok_or(Errno::ENOENT)?.copy_to_struct_or_zero(data)
    }

    /// The object an IDR READ attribute resolved to.
    pub(crate) fn obj(&self, id: u16) -> Option<&Uobj> {
        match self.attrs.get(&id)?.res.as_ref()? {
            Resolved::Obj(o) => Some(o),
            _ => None,
        }
    }

    /// The fd object an FD READ attribute resolved to.
    pub(crate) fn fd_obj(&self, id: u16) -> Option<&FdObj> {
        match self.attrs.get(&id)?.res.as_ref()? {
            Resolved::Fd(f) => Some(f),
            _ => None,
        }
    }

    /// The handle reserved for a NEW attribute.
    pub(crate) fn new_handle(&self, id: u16) -> Option<u32> {
        match self.attrs.get(&id)?.res.as_ref()? {
            Resolved::NewIdr(h) => Some(*h),
            _ => None,
        }
    }

    /// The driver data of the call.
    pub(crate) fn udata(&self) -> Udata {
        Udata {
            inp: self.in_buf(UVERBS_ATTR_UHW_IN).unwrap_or_default(),
            out: self.out_buf(UVERBS_ATTR_UHW_OUT).map(|o| OutBuf { valid_flag: None, ..o }).unwrap_or_default(),
        }
    }
}

/// One ioctl call in a handler's hands.
pub(crate) struct Call<'a> {
    pub hca: &'a Arc<Hca>,
    pub st: &'a mut FileState,
    pub b: Bundle,
    /// Driver data (empty for methods without `UVERBS_ATTR_UHW`).
    pub udata: Udata,
    /// The object a destroy method destroyed before its handler ran.
    pub destroyed: Option<Uobj>,
}

impl Call<'_> {
    /// Attaches the created object to the handle of NEW attribute `id`.
    pub(crate) fn fill_new(&mut self, id: u16, obj: Uobj) -> Result<()> {
        let h = self.b.new_handle(id).ok_or(Errno::EINVAL)?;
        self.st.table.fill(h, obj);
        Ok(())
    }
}

/// The methods softhca implements, by (object, method).
pub(crate) fn find_method(object: u16, method: u16) -> Option<&'static MethodDef> {
    methods::METHODS.iter().find(|m| m.object == object && m.method == method)
}

/// Processes one attribute against its spec (`uverbs_process_attr`).
fn process_attr(hca: &Hca, st: &mut FileState, b: &Bundle, def: &AttrDef, ua: &IoctlAttr, idx: usize)
                -> Result<Option<Resolved>> {
    let reserved = ua.elem_id as u16 | (ua.elem_reserved as u16) << 8;
    match def.spec {
        Spec::PtrIn { min, len, zero_trailing } | Spec::PtrOut { min, len, zero_trailing } => {
            if let Spec::PtrIn { .. } = def.spec {
                if ua.len > len && zero_trailing {
                    let buf = if ua.len <= 8 {
                        InBuf::Inline { bytes: ua.data.to_ne_bytes(), len: ua.len as usize }
                    } else {
                        InBuf::User { addr: ua.data, len: ua.len as usize }
                    };
                    if !buf.is_cleared(len as usize) {
                        return Err(Errno::EOPNOTSUPP);
                    }
                }
            }
            if ua.len < min || (!zero_trailing && ua.len > len) {
                return Err(Errno::EINVAL);
            }
            if reserved != 0 {
                return Err(Errno::EINVAL);
            }
            Ok(None)
        }
        Spec::PtrInCopied { min } => {
            if ua.len < min {
                return Err(Errno::EINVAL);
            }
            if reserved != 0 {
                return Err(Errno::EINVAL);
            }
            // `uverbs_process_attr`: `alloc_and_copy && !uverbs_attr_ptr_is_inline`.
            if ua.len as usize > std::mem::size_of::<u64>() {
                let mut copy = vec![0u8; ua.len as usize];
                copy_from_user(&mut copy, ua.data)?;
            }
            Ok(None)
        }
        Spec::EnumIn { elems } => {
            let e = elems.get(ua.elem_id as usize).ok_or(Errno::EOPNOTSUPP)?;
            if ua.elem_reserved != 0 {
                return Err(Errno::EINVAL);
            }
            let Spec::PtrIn { min, len, zero_trailing } = *e else { return Err(Errno::EOPNOTSUPP) };
            if ua.len > len && zero_trailing {
                let buf = if ua.len <= 8 {
                    InBuf::Inline { bytes: ua.data.to_ne_bytes(), len: ua.len as usize }
                } else {
                    InBuf::User { addr: ua.data, len: ua.len as usize }
                };
                if !buf.is_cleared(len as usize) {
                    return Err(Errno::EOPNOTSUPP);
                }
            }
            if ua.len < min || (!zero_trailing && ua.len > len) {
                return Err(Errno::EINVAL);
            }
            Ok(None)
        }
        Spec::IdrsArr { ty, min, max } => {
            // uverbs_process_idrs_array
            let n = ua.len as usize / 4;
            if reserved != 0 || ua.len % 4 != 0 || n < min as usize || n > max as usize {
                return Err(Errno::EINVAL);
            }
            let mut ids = vec![0u8; ua.len as usize];
            if ua.len as usize > 8 {
                copy_from_user(&mut ids, ua.data)?;
            } else {
                ids.copy_from_slice(&ua.data.to_ne_bytes()[..ua.len as usize]);
            }
            let objs = ids.chunks_exact(4)
                .map(|c| st.table.lookup(u32::from_ne_bytes(c.try_into().unwrap()) as i64, ty))
                .collect::<Result<Vec<_>>>()?;
            Ok(Some(Resolved::Objs(objs)))
        }
        Spec::Idr { ty, access } => {
            if reserved != 0 || ua.len != 0 {
                return Err(Errno::EINVAL);
            }
            let id = ua.data as i64;
            match access {
                Access::New => {
                    st.ctx()?;
                    let h = st.table.reserve(ty)?;
                    let at = b.user_attrs.wrapping_add((idx * ATTR_LEN) as u64 + 8);
                    // Written before anything else can fail, like the kernel's put_user;
                    // on a later failure the handle is released again.
                    if let Err(e) = copy_to_user(at, &(h as u64).to_ne_bytes()) {
                        st.table.abort(h);
                        return Err(e);
                    }
                    Ok(Some(Resolved::NewIdr(h)))
                }
                Access::Read => Ok(Some(Resolved::Obj(st.table.lookup(id, ty)?))),
                Access::Destroy => {
                    st.table.lookup(id, ty)?;
                    Ok(Some(Resolved::Destroy(id as u32)))
                }
            }
        }
        Spec::Fd { ty, access } => {
            if reserved != 0 || ua.len != 0 {
                return Err(Errno::EINVAL);
            }
            let id = ua.data as i64;
            match access {
                Access::New => {
                    st.ctx()?;
                    let (obj, app) = methods::channel::new_fd_object(hca, ty).map_err(|_| Errno::ENOMEM)?;
                    let at = b.user_attrs.wrapping_add((idx * ATTR_LEN) as u64 + 8);
                    let n = std::os::fd::AsRawFd::as_raw_fd(&app) as i64;
                    copy_to_user(at, &n.to_ne_bytes())?;
                    Ok(Some(Resolved::NewFd(NewFd { obj, app })))
                }
                Access::Read | Access::Destroy => {
                    let fdno = i32::try_from(id).map_err(|_| Errno::EINVAL)?;
                    Ok(Some(Resolved::Fd(methods::channel::lookup_fd(st, fdno, ty)?)))
                }
            }
        }
    }
}

/// Runs one `RDMA_VERBS_IOCTL` whose header is at `arg`.
pub(crate) fn run(hca: &Arc<Hca>, st: &mut FileState, arg: u64) -> Result<()> {
    let mut hdr = IoctlHdr::default();
    copy_from_user(hdr.as_mut_bytes(), arg)?;
    let n = hdr.num_attrs as usize;
    if hdr.length as usize > MAX_LEN || hdr.length as usize != HDR_LEN + n * ATTR_LEN {
        return Err(Errno::EINVAL);
    }
    if hdr.reserved1 != 0 || hdr.reserved2 != 0 {
        return Err(Errno::EPROTONOSUPPORT);
    }
    if hdr.driver_id != RDMA_DRIVER_MLX5 {
        return Err(Errno::EINVAL);
    }
    let def = find_method(hdr.object_id, hdr.method_id).ok_or(Errno::EPROTONOSUPPORT)?;
    let user_attrs = arg.wrapping_add(HDR_LEN as u64);
    let mut raw = vec![0u8; n * ATTR_LEN];
    copy_from_user(&mut raw, user_attrs)?;
    let uattrs: Vec<IoctlAttr> = raw.chunks_exact(ATTR_LEN)
        .map(|c| IoctlAttr::read_from_bytes(c).unwrap_or_default())
        .collect();

    let mut b = Bundle { user_attrs, attrs: BTreeMap::new() };
    let r = process_and_run(hca, st, def, &mut b, &uattrs);
    finalize(hca, st, b, r.is_ok());
    r
}

fn process_and_run(hca: &Arc<Hca>, st: &mut FileState, def: &MethodDef, b: &mut Bundle, uattrs: &[IoctlAttr]) -> Result<()> {
    for (idx, ua) in uattrs.iter().enumerate() {
        let Some(adef) = def.attr(ua.attr_id) else {
            if ua.flags & UVERBS_ATTR_F_MANDATORY != 0 {
                return Err(Errno::EPROTONOSUPPORT);
            }
            continue;
        };
        if b.attrs.contains_key(&ua.attr_id) {
            return Err(Errno::EINVAL);
        }
        let res = process_attr(hca, st, b, adef, ua, idx)?;
        b.attrs.insert(ua.attr_id, AttrVal { idx, uattr: *ua, res });
    }
    if def.attrs.iter().any(|a| a.mandatory && !b.attrs.contains_key(&a.id)) {
        return Err(Errno::EINVAL);
    }
    let udata = if def.udata { b.udata() } else { Udata::default() };
    let mut destroyed = None;
    if let Some(id) = def.destroy_attr() {
        if let Some(Resolved::Destroy(h)) = b.attrs.get(&id).and_then(|a| a.res.as_ref()) {
            let h = *h;
            let ty = match def.attr(id).map(|a| a.spec) {
                Some(Spec::Idr { ty, .. }) => ty,
                _ => return Err(Errno::EINVAL),
            };
            destroyed = Some(st.destroy(hca, h as i64, ty)?);
        }
    }
    let mut call = Call { hca, st, b: std::mem::take(b), udata, destroyed };
    let r = (def.handler)(&mut call);
    *b = std::mem::take(&mut call.b);
    // A handler must never claim "method not supported"; the kernel rewrites it.
    if r == Err(Errno::EPROTONOSUPPORT) {
        return Err(Errno::EINVAL);
    }
    r?;
    if def.udata {
        if let Some(out) = b.out_buf(UVERBS_ATTR_UHW_OUT) {
            out.set_valid()?;
        }
    }
    Ok(())
}

/// Commits or aborts the objects the call created (`bundle_destroy`).
fn finalize(hca: &Hca, st: &mut FileState, b: Bundle, commit: bool) {
    for (_, a) in b.attrs {
        match a.res {
            Some(Resolved::NewIdr(h)) => {
                if commit {
                    st.table.commit(h);
                } else if let Some(obj) = st.table.abort(h) {
                    let _ = st.destroy_hw(hca, &obj, Why::Abort);
                }
            }
            Some(Resolved::NewFd(nf)) if commit => {
                let _ = nf.app.into_raw_fd();
                st.add_fd(nf.obj);
            }
            // Not committed: dropping the new fd object closes both ends.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_table_is_consistent() {
        for (i, m) in methods::METHODS.iter().enumerate() {
            assert!(methods::METHODS[..i].iter().all(|p| (p.object, p.method) != (m.object, m.method)),
                    "duplicate method {:#x}/{:#x}", m.object, m.method);
            for (j, a) in m.attrs.iter().enumerate() {
                assert!(m.attrs[..j].iter().all(|p| p.id != a.id), "duplicate attr {:#x} in {:#x}/{:#x}", a.id, m.object, m.method);
            }
            assert!(m.attrs.iter().filter(|a| matches!(a.spec, Spec::Idr { access: Access::Destroy, .. })).count() <= 1);
        }
    }

    #[test]
    fn flags_and_consts() {
        let mut b = Bundle::default();
        let ua = IoctlAttr { attr_id: 1, len: 4, data: 0xffff_ffff_0000_0003, ..Default::default() };
        b.attrs.insert(1, AttrVal { idx: 0, uattr: ua, res: None });
        assert_eq!(b.get_flags32(1, 3), Ok(3), "a 4-byte flags attribute uses the low word only");
        assert_eq!(b.get_flags32(1, 1), Err(Errno::EINVAL));
        assert_eq!(b.get_flags32(2, 0), Ok(0), "absent means no flags");
        let ua = IoctlAttr { attr_id: 3, len: 6, data: 1, ..Default::default() };
        b.attrs.insert(3, AttrVal { idx: 1, uattr: ua, res: None });
        assert_eq!(b.get_flags64(3, 1), Err(Errno::EINVAL));
        assert_eq!(b.get_const(3, 0), Err(Errno::EINVAL));
        assert_eq!(b.get_const(3, 1), Ok(1));
        assert_eq!(b.get_const(9, 1), Err(Errno::ENOENT));
        assert_eq!(b.copy_from::<u32>(1), Ok(3));
        assert_eq!(b.copy_from::<u32>(3), Err(Errno::EINVAL));
    }
}
