//! A loaded program's maps, reached through the program's descriptor rather than through
//! its loader (which may keep them private), and emptied between test cases.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;

use anyhow::{ensure, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use super::prog_info;

/// More maps than any program of netdoctor's (or the kernel's) uses.
const MAX_MAPS: usize = 64;

/// Ids of the maps program `fd` uses.
pub fn program_map_ids(fd: RawFd) -> io::Result<Vec<u32>> {
    let mut ids = [0u32; MAX_MAPS];
    let info = prog_info(fd, &mut ids)?;
    let n = (info.nr_map_ids as usize).min(ids.len());
    Ok(ids[..n].to_vec())
}

/// The maps program `fd` uses, by name.
pub fn program_maps(fd: RawFd) -> Result<BTreeMap<String, MapHandle>> {
    let mut by_name = BTreeMap::new();
    for id in program_map_ids(fd).context("listing the program's maps")? {
        let map = MapHandle::from_map_id(id).with_context(|| format!("opening map {id}"))?;
        by_name.insert(map.name().to_string_lossy().into_owned(), map);
    }
    Ok(by_name)
}

/// Deletes every entry of a hash map.
pub fn delete_all(map: &MapHandle) -> Result<()> {
    let keys: Vec<Vec<u8>> = map.keys().collect();
    for key in keys {
        map.delete(&key)?;
    }
    ensure!(map.keys().next().is_none(), "{:?} not empty", map.name());
    Ok(())
}

/// Zeroes every entry of an array map.
pub fn zero_array(map: &MapHandle) -> Result<()> {
    let n = map.max_entries();
    let keys: Vec<u8> = (0..n).flat_map(u32::to_ne_bytes).collect();
    let values = vec![0u8; n as usize * map.value_size() as usize];
    map.update_batch(&keys, &values, n, MapFlags::ANY, MapFlags::ANY)?;
    Ok(())
}

/// A map's entries: key bytes to value bytes (one value per CPU for a per-CPU map).
pub type Contents = BTreeMap<Vec<u8>, Vec<Vec<u8>>>;

/// Several maps' [`Contents`], by name.
pub type Snapshot = BTreeMap<String, Contents>;

/// Every entry of a map: key bytes to value bytes (one value per CPU for a per-CPU map).
/// For comparing what a program run wrote; the maps of global data (`.bss`, `.rodata`:
/// names with a dot) are left out.
pub fn contents(map: &MapHandle) -> Result<Contents> {
    use libbpf_rs::MapType;
    let percpu = matches!(
        map.map_type(),
        MapType::PercpuArray | MapType::PercpuHash | MapType::LruPercpuHash
    );
    let mut out = BTreeMap::new();
    for key in map.keys() {
        let values = if percpu {
            map.lookup_percpu(&key, MapFlags::ANY)?
        } else {
            map.lookup(&key, MapFlags::ANY)?.map(|v| vec![v])
        };
        if let Some(v) = values {
            out.insert(key, v);
        }
    }
    Ok(out)
}

/// The names of the maps among `maps` whose contents differ between two snapshots taken
/// with [`snapshot`].
pub fn changed(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    after
        .iter()
        .filter(|(name, c)| before.get(*name) != Some(c))
        .map(|(name, _)| name.clone())
        .collect()
}

/// The contents of every map in `maps` but those of global data (names with a dot).
pub fn snapshot(maps: &BTreeMap<String, MapHandle>) -> Result<Snapshot> {
    maps.iter()
        .filter(|(name, _)| !name.contains('.'))
        .map(|(name, m)| {
            Ok((
                name.clone(),
                contents(m).with_context(|| format!("reading {name}"))?,
            ))
        })
        .collect()
}
