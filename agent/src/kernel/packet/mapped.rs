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
    /// Bytes from one value to the next: the kernel rounds values up to 8 bytes.
    stride: usize,
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
        let stride = value_size.next_multiple_of(8);
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = (stride * entries).div_ceil(page).max(1) * page;
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
            stride,
            entries,
            writable: write,
        })
    }

    /// Values in the mapping.
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// The address of byte `offset` of value `index`, checked to hold `size` bytes aligned
    /// to `size` inside the value (the mapping starts on a page and values are 8-byte
    /// aligned, so the offset within the mapping decides).
    fn at(&self, index: usize, offset: usize, size: usize) -> *mut u8 {
        let at = index * self.stride + offset;
        assert!(
            index < self.entries && offset + size <= self.value_size && at % size == 0,
            "field {offset}+{size} of value {index} outside the mapping or misaligned"
        );
        // SAFETY: inside the mapping (asserted above), which is `len` bytes long.
        unsafe { self.base.as_ptr().add(at) }
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

    /// Value `index` as a `T` read under its sequence lock, whose halves are the 32-bit
    /// fields at byte `begin` and `end`: `begin` first, then every word, then `end`; both
    /// equal means no rewrite overlapped the copy (the programs store `end`, the contents,
    /// then `begin`). Returns the copy and its generation, or `None` if each of `tries`
    /// copies was torn. A count added meanwhile may show in some fields and not yet in
    /// others: that is a read a moment earlier, not a tear.
    pub(crate) fn copy_locked<T: plain::Plain + Default>(
        &self,
        index: usize,
        begin: usize,
        end: usize,
        tries: usize,
    ) -> Option<(T, u32)> {
        let size = std::mem::size_of::<T>();
        if size != self.value_size || size % 8 != 0 {
            return None;
        }
        let mut bytes = vec![0u8; size];
        for _ in 0..tries {
            let b = self.load_u32(index, begin, Ordering::Acquire);
            for w in 0..size / 8 {
                let v = self.load_u64(index, w * 8, Ordering::Acquire);
                bytes[w * 8..w * 8 + 8].copy_from_slice(&v.to_ne_bytes());
            }
            std::sync::atomic::fence(Ordering::Acquire);
            let e = self.load_u32(index, end, Ordering::Acquire);
            if b == e {
                return crate::kernel::views::decode(&bytes).map(|v| (v, b));
            }
            std::hint::spin_loop();
        }
        None
    }

    /// Writes the 32-bit field at byte `offset` of value `index` (a writable mapping).
    pub(crate) fn store_u32(&self, index: usize, offset: usize, value: u32) {
        assert!(self.writable, "store into a read-only mapping");
        // SAFETY: as in `load_u64`; the mapping is writable (asserted).
        unsafe { AtomicU32::from_ptr(self.at(index, offset, 4).cast()) }
            .store(value, Ordering::Release);
    }

    /// Writes `bytes` at byte `offset` of value `index` (a writable mapping), a 32-bit word
    /// at a time: `offset` and the length are multiples of 4.
    pub(crate) fn store_bytes(&self, index: usize, offset: usize, bytes: &[u8]) {
        assert!(
            bytes.len() % 4 == 0,
            "{} bytes are not whole words",
            bytes.len()
        );
        for (i, word) in bytes.chunks_exact(4).enumerate() {
            let w = u32::from_ne_bytes([word[0], word[1], word[2], word[3]]);
            self.store_u32(index, offset + i * 4, w);
        }
    }

    /// A copy of `out.len()` bytes at byte `offset` of value `index`, a 64-bit word at a
    /// time: `offset` and the length are multiples of 8. For values nothing writes while
    /// they are read.
    pub(crate) fn copy_bytes(&self, index: usize, offset: usize, out: &mut [u8]) {
        assert!(
            out.len() % 8 == 0,
            "{} bytes are not whole words",
            out.len()
        );
        for (i, word) in out.chunks_exact_mut(8).enumerate() {
            let v = self.load_u64(index, offset + i * 8, Ordering::Relaxed);
            word.copy_from_slice(&v.to_ne_bytes());
        }
    }

    /// Writes the byte at `offset` of value `index` (a writable mapping).
    pub(crate) fn store_u8(&self, index: usize, offset: usize, value: u8) {
        assert!(self.writable, "store into a read-only mapping");
        // SAFETY: as in `store_u32`.
        unsafe { AtomicU8::from_ptr(self.at(index, offset, 1)) }.store(value, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::{MapFlags, MapHandle, MapType};

    /// A value size that is not a multiple of 8 (12 bytes): the kernel lays values 16
    /// bytes apart, and every index must still find the value the map calls its own.
    #[test]
    fn values_of_an_odd_size_are_found_at_the_kernels_stride() {
        if !crate::testing::root_or_skip("to create a BPF map") {
            return;
        }
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: libbpf_sys::BPF_F_MMAPABLE,
            ..Default::default()
        };
        let map = MapHandle::create(MapType::Array, Some("nd_mapped_test"), 4, 12, 600, &opts)
            .expect("create a mappable array");
        for index in 0..600u32 {
            let value: Vec<u8> = [index, index + 1_000_000, index + 2_000_000]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect();
            map.update(&index.to_ne_bytes(), &value, MapFlags::ANY)
                .expect("update");
        }
        let mapped = Mapped::map(&map, true).expect("map the values");
        for index in 0..600usize {
            let i = index as u32;
            assert_eq!(mapped.load_u32(index, 0, Ordering::Relaxed), i);
            assert_eq!(mapped.load_u32(index, 4, Ordering::Relaxed), i + 1_000_000);
            assert_eq!(mapped.load_u32(index, 8, Ordering::Relaxed), i + 2_000_000);
        }
        mapped.store_u32(599, 4, 7);
        mapped.store_u8(598, 8, 9);
        let last = map
            .lookup(&599u32.to_ne_bytes(), MapFlags::ANY)
            .expect("lookup")
            .expect("present");
        assert_eq!(last[4..8], 7u32.to_ne_bytes());
        assert_eq!(last[0..4], 599u32.to_ne_bytes(), "a neighbour field kept");
        let before = map
            .lookup(&598u32.to_ne_bytes(), MapFlags::ANY)
            .expect("lookup")
            .expect("present");
        assert_eq!(before[8], 9);
        // Whole words written and read back: a 12-byte value's first 8 bytes.
        mapped.store_bytes(5, 0, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut back = [0u8; 8];
        mapped.copy_bytes(5, 0, &mut back);
        assert_eq!(back, [1, 2, 3, 4, 5, 6, 7, 8]);
        let five = map
            .lookup(&5u32.to_ne_bytes(), MapFlags::ANY)
            .expect("lookup")
            .expect("present");
        assert_eq!(five[..8], [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            five[8..12],
            2_000_005u32.to_ne_bytes(),
            "the word after kept"
        );
    }
}
