//! A mappable BPF array (`BPF_F_MMAPABLE`) mapped into this process: the values as the
//! programs see them, without a system call per value, and single fields written in place.
//!
//! A map update always rewrites a whole value: for a value the programs count into, the
//! increments made between reading it and writing it back are lost. Writing one field
//! through the mapping leaves every other field to the programs.

use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use libbpf_rs::MapCore;

/// The values of one array map, mapped read-only or read-write.
pub(crate) struct Mapped {
    base: NonNull<u8>,
    len: usize,
    value_size: usize,
    entries: usize,
    writable: bool,
}

impl std::fmt::Debug for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapped")
            .field("entries", &self.entries)
            .field("value_size", &self.value_size)
            .finish()
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping `map` created, unmapped once here.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

impl Mapped {
    /// Maps every value of `map`, writable when `write`. The map must be a loaded array
    /// created with `BPF_F_MMAPABLE` (the kernel refuses others).
    pub(crate) fn map(map: &impl MapCore, write: bool) -> std::io::Result<Mapped> {
        let (value_size, entries) = (map.value_size() as usize, map.max_entries() as usize);
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = (value_size * entries).div_ceil(page).max(1) * page;
        let prot = if write {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh shared mapping of the map's whole (page-rounded) value area, which
        // is what the kernel allows for a mappable array; the descriptor is valid for the
        // call, and the mapping keeps the map alive until `munmap`.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| std::io::Error::other("mmap returned NULL"))?;
        Ok(Mapped {
            base,
            len,
            value_size,
            entries,
            writable: write,
        })
    }

    /// Values in the mapping.
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// The address of byte `offset` of value `index`, checked to hold `size` bytes aligned
    /// to `size` inside the value (a value starts on a page: the kernel aligns mappable
    /// arrays' values so, and a value size that is a multiple of 8 keeps them aligned).
    fn at(&self, index: usize, offset: usize, size: usize) -> *mut u8 {
        assert!(
            index < self.entries
                && offset + size <= self.value_size
                && (index * self.value_size + offset) % size == 0,
            "field {offset}+{size} of value {index} outside the mapping or misaligned"
        );
        // SAFETY: inside the mapping (asserted above), which is `len` bytes long.
        unsafe { self.base.as_ptr().add(index * self.value_size + offset) }
    }

    /// The 64-bit field at byte `offset` of value `index`.
    pub(crate) fn load_u64(&self, index: usize, offset: usize, order: Ordering) -> u64 {
        // SAFETY: `at` checked bounds and alignment; the mapping lives as long as `self`.
        // The programs write these fields concurrently, which is why they are atomics.
        unsafe { AtomicU64::from_ptr(self.at(index, offset, 8).cast()) }.load(order)
    }

    /// The 32-bit field at byte `offset` of value `index`.
    pub(crate) fn load_u32(&self, index: usize, offset: usize, order: Ordering) -> u32 {
        // SAFETY: as in `load_u64`.
        unsafe { AtomicU32::from_ptr(self.at(index, offset, 4).cast()) }.load(order)
    }

    /// Writes the 32-bit field at byte `offset` of value `index` (a writable mapping).
    pub(crate) fn store_u32(&self, index: usize, offset: usize, value: u32) {
        assert!(self.writable, "store into a read-only mapping");
        // SAFETY: as in `load_u64`; the mapping is writable (asserted).
        unsafe { AtomicU32::from_ptr(self.at(index, offset, 4).cast()) }
            .store(value, Ordering::Release);
    }

    /// Writes the byte at `offset` of value `index` (a writable mapping).
    pub(crate) fn store_u8(&self, index: usize, offset: usize, value: u8) {
        assert!(self.writable, "store into a read-only mapping");
        // SAFETY: as in `store_u32`.
        unsafe { AtomicU8::from_ptr(self.at(index, offset, 1)) }.store(value, Ordering::Release);
    }
}
