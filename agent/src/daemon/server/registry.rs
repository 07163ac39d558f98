//! The open connections, capped: at the cap, a new connection closes the oldest idle one
//! (no request being answered), as a web server reuses its keep-alive connections, so
//! idle connections can neither exhaust descriptors nor lock clients out. When every
//! connection is answering a request, the next one waits in the listen backlog, where it
//! costs the agent no descriptor.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// What the registry knows of one connection.
#[derive(Debug)]
struct Entry {
    /// Requests being answered (0 or 1: HTTP/1.1 answers one at a time).
    busy: Arc<AtomicUsize>,
    /// Told when the connection must close to make room.
    evict: Arc<Notify>,
}

/// The open connections, oldest first.
#[derive(Debug)]
pub struct Registry {
    cap: usize,
    open: Mutex<(u64, BTreeMap<u64, Entry>)>,
    /// Told when a connection ends.
    freed: Notify,
}

/// One admitted connection; leaving the registry when dropped.
#[derive(Debug)]
pub struct Slot {
    id: u64,
    registry: Arc<Registry>,
    busy: Arc<AtomicUsize>,
    evict: Arc<Notify>,
}

/// Marks its connection busy while it lives.
#[derive(Debug)]
pub struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Registry {
    /// A registry admitting at most `cap` connections (at least one).
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Registry {
            cap: cap.max(1),
            open: Mutex::new((0, BTreeMap::new())),
            freed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, (u64, BTreeMap<u64, Entry>)> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Connections open (or being closed to make room).
    pub fn len(&self) -> usize {
        self.lock().1.len()
    }

    /// Admits a connection: below the cap at once; at it by evicting the oldest idle
    /// connection (`Some(true)` says one was); `None` while every connection is busy.
    pub fn admit(self: &Arc<Self>) -> Option<(Slot, bool)> {
        let mut guard = self.lock();
        let (next, open) = &mut *guard;
        let mut evicted = false;
        if open.len() >= self.cap {
            let oldest_idle = open
                .iter()
                .find(|(_, e)| e.busy.load(Ordering::Acquire) == 0)
                .map(|(id, _)| *id)?;
            if let Some(e) = open.remove(&oldest_idle) {
                e.evict.notify_one();
                evicted = true;
            }
        }
        let id = *next;
        *next += 1;
        let (busy, evict) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        open.insert(
            id,
            Entry {
                busy: busy.clone(),
                evict: evict.clone(),
            },
        );
        let slot = Slot {
            id,
            registry: self.clone(),
            busy,
            evict,
        };
        Some((slot, evicted))
    }

    /// Waits until a connection ends (returns at once if one ended since the last wait).
    pub async fn freed(&self) {
        self.freed.notified().await;
    }
}

impl Slot {
    /// Marks the connection busy until the guard is dropped.
    pub fn busy(&self) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.busy.clone())
    }

    /// Completes when the connection must close to make room for a newer one.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.registry.lock().1.remove(&self.id);
        self.registry.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let r = Registry::new(2);
        let (a, evicted) = r.admit().expect("first");
        assert!(!evicted);
        let (b, _) = r.admit().expect("second");
        // `a` answers a request: `b` is the oldest idle one.
        let busy = a.busy();
        let (c, evicted) = r.admit().expect("third, in place of b");
        assert!(evicted && r.len() == 2);
        // `b` was told; its slot leaves without disturbing the others.
        let told = futures::FutureExt::now_or_never(b.evicted());
        assert!(told.is_some(), "b was not told to close");
        drop(b);
        assert_eq!(r.len(), 2);
        // `c` is busy too: nobody can make room.
        let busy_c = c.busy();
        assert!(r.admit().is_none());
        drop(busy);
        let (_d, evicted) = r.admit().expect("a is idle again");
        assert!(evicted);
        drop(busy_c);
        drop(a);
        drop(c);
        assert_eq!(r.len(), 1);
    }
}
