//! The stack the vfork-style child runs on until it execs.

use std::io;
use std::ptr::NonNull;

use super::sys::parent as sys;

/// Usable stack size. The child function only makes system calls; 64 KiB is ample.
const STACK_SIZE: usize = 64 * 1024;

/// An anonymous mapping with a `PROT_NONE` guard page at its low end; unmapped on drop.
pub(crate) struct ChildStack {
    base: NonNull<libc::c_void>,
    len: usize,
}

// Safety: the mapping is owned by this value alone; any thread may use or unmap it.
unsafe impl Send for ChildStack {}

impl ChildStack {
    /// Maps a fresh stack.
    pub(crate) fn new() -> io::Result<ChildStack> {
        let page = page_size();
        let len = STACK_SIZE + page;
        let base = sys::map_stack(len)?;
        let stack = ChildStack { base, len };
        // Safety: the first page lies inside the mapping just created and owned by `stack`.
        unsafe { sys::guard(base, page) }?;
        Ok(stack)
    }

    /// The usable region (above the guard page): its low end and size.
    pub(crate) fn region(&self) -> (*mut libc::c_void, usize) {
        // Safety: STACK_SIZE bytes below the top lie inside the mapping (above the
        // guard page), so the pointer stays within it.
        let low = unsafe { self.top().cast::<u8>().sub(STACK_SIZE).cast() };
        (low, STACK_SIZE)
    }

    /// The initial stack pointer (the high end; stacks grow down on every supported arch).
    pub(crate) fn top(&self) -> *mut libc::c_void {
        // Safety: `len` is the size of the mapping, so the result is one past its end,
        // which is a valid pointer to compute.
        unsafe { self.base.as_ptr().cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // Safety: the mapping is owned by this value and no longer used: the child ran
        // on it has exec'd or exited (before `clone` returned for a vfork child, before
        // its launch was retired for a detached one).
        unsafe { sys::unmap(self.base, self.len) }
    }
}

fn page_size() -> usize {
    sys::page_size().unwrap_or(4096)
}

thread_local! {
    /// This thread's child stack, made on first use.
    static STACK: std::cell::RefCell<Option<ChildStack>> = const { std::cell::RefCell::new(None) };
}

/// Run `f` with this thread's (reused) child stack.
pub(crate) fn with_thread_stack<R>(f: impl FnOnce(&ChildStack) -> R) -> io::Result<R> {
    STACK.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(ChildStack::new()?);
        }
        match slot.as_ref() {
            Some(stack) => Ok(f(stack)),
            None => Err(io::Error::from_raw_os_error(libc::ENOMEM)),
        }
    })
}
