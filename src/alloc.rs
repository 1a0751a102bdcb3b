//! Global allocator guard against allocation sizes taken from the wire.
//!
//! kafka-protocol 0.18 sizes `Vec::with_capacity(count)` from an array count read off the
//! wire before it checks that the frame holds that many elements. A tiny request with a count
//! of 0x7fffffff then asks for tens of GiB, and the default allocator aborts the process when
//! that fails. Here every request of 1 GiB or more is served by an anonymous
//! `mmap(MAP_NORESERVE)`: the address space is reserved but no memory is committed, the decode
//! fails on the short buffer without touching it, and the mapping is returned on free. Smaller
//! requests go to the system allocator unchanged.

use std::alloc::{GlobalAlloc, Layout, System};

const HUGE: usize = 1 << 30;

pub struct GuardedAlloc;

unsafe impl GlobalAlloc for GuardedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= HUGE && layout.align() <= 4096 {
            return map(layout.size());
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= HUGE && layout.align() <= 4096 {
            // Fresh anonymous mappings read as zero.
            return map(layout.size());
        }
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() >= HUGE && layout.align() <= 4096 {
            unsafe { libc_munmap(ptr, layout.size()) };
            return;
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_huge = layout.size() >= HUGE && layout.align() <= 4096;
        let new_huge = new_size >= HUGE && layout.align() <= 4096;
        if !old_huge && !new_huge {
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let new_ptr = unsafe { self.alloc(new_layout) };
        if !new_ptr.is_null() {
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new_ptr, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new_ptr
    }
}

fn map(size: usize) -> *mut u8 {
    use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous};
    let Some(len) = std::num::NonZeroUsize::new(size) else {
        return std::ptr::null_mut();
    };
    // SAFETY: a new private anonymous mapping aliases nothing.
    match unsafe {
        mmap_anonymous(
            None,
            len,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
        )
    } {
        Ok(p) => p.as_ptr() as *mut u8,
        Err(_) => std::ptr::null_mut(),
    }
}

unsafe fn libc_munmap(ptr: *mut u8, size: usize) {
    if let Some(p) = std::ptr::NonNull::new(ptr as *mut std::ffi::c_void) {
        // SAFETY: `ptr` came from `map` with this size.
        let _ = unsafe { nix::sys::mman::munmap(p, size) };
    }
}

/// Lets glibc keep request-sized buffers (up to 32 MiB) in its heap for reuse, instead of
/// giving each one its own `mmap` and returning it with `munmap` on free.
///
/// By default glibc maps every allocation above a threshold (128 KiB, raised only up to the
/// size of the last freed mapping) separately, so each large produce request (a 1 MB batch
/// is normal) cost a fresh mapping: one page fault and a zeroed page per 4 KiB for the frame
/// buffer and again for the produce copy, then an `munmap`. Profiled under a 1 KiB produce
/// load that was about a fifth of the broker's CPU. Kafka reuses its (pre-touched) JVM heap.
/// Call once at start-up, before other threads exist.
pub fn keep_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::ffi::c_int;
        unsafe extern "C" {
            fn mallopt(param: c_int, value: c_int) -> c_int;
        }
        const M_TRIM_THRESHOLD: c_int = -1;
        const M_MMAP_THRESHOLD: c_int = -3;
        // SAFETY: plain C calls that only change malloc's tuning parameters.
        unsafe {
            mallopt(M_MMAP_THRESHOLD, 32 << 20);
            mallopt(M_TRIM_THRESHOLD, 64 << 20);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn huge_capacity_is_address_space_only() {
        // 0x7fffffff elements of 72 bytes: ~143 GiB, never touched.
        for _ in 0..100 {
            let v: Vec<[u8; 72]> = Vec::with_capacity(0x7fff_ffff);
            assert!(v.capacity() >= 0x7fff_ffff);
        }
    }
}
