//! The objects handed to NCCL as `void*`, and which of them are alive: every pointer
//! NCCL passes back is looked up here before it is used, so a wrong or stale handle
//! gets an error code instead of a dereference of garbage.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The live objects of one kind, by address.
pub struct Live<T> {
    map: Mutex<Option<HashMap<usize, Arc<T>>>>,
}

impl<T> Live<T> {
    pub const fn new() -> Live<T> {
        Live { map: Mutex::new(None) }
    }

    /// Makes `v` live; its `void*` is the address of its Arc's contents.
    pub fn insert(&self, v: T) -> *mut std::ffi::c_void {
        let a = Arc::new(v);
        let p = Arc::as_ptr(&a) as usize;
        self.map.lock().unwrap().get_or_insert_with(HashMap::new).insert(p, a);
        p as *mut std::ffi::c_void
    }

    /// The object at `p`, if it is live.
    pub fn get(&self, p: *mut std::ffi::c_void) -> Option<Arc<T>> {
        self.map.lock().unwrap().as_ref()?.get(&(p as usize)).cloned()
    }

    /// Forgets the object at `p` (dropped when the last user lets go).
    pub fn remove(&self, p: *mut std::ffi::c_void) -> Option<Arc<T>> {
        self.map.lock().unwrap().as_mut()?.remove(&(p as usize))
    }
}

impl<T> Default for Live<T> {
    fn default() -> Self {
        Live::new()
    }
}
