//! What a watched interface's packets go through (`enum nd_path` in ebpf/include/packet.h):
//! bits in the header of the interface's counters, the line every packet loads first, and
//! the two settings behind them that change while the data plane runs: tunnel ports added
//! (`user_ports` in ebpf/include/encap.bpf.h; `ND_PATH_USER_PORTS`) and the families whose
//! received segments can be this host's own (`local_addrs`; `ND_PATH_LOCAL_IN4`/`IN6`).

use std::sync::atomic::Ordering;

use libbpf_rs::{MapCore, MapFlags};

use super::dataplane::{no_bss, Dataplane, MAX_TUNNEL_PORTS};
use super::local_tcp::LocalAddrs;
use super::options::{TunnelPort, PATH_LOCAL_IN4, PATH_LOCAL_IN6};
use crate::kernel::error::{Error, Result};
use crate::kernel::views::{encode, nd_iface_dir};

impl Dataplane<'_> {
    /// Recognises UDP port `tp.port` as `tp.encap` from now on (a tunnel daemon found while
    /// running). Returns false if the port is known already; fails when all
    /// [`MAX_TUNNEL_PORTS`] slots are taken.
    pub fn add_tunnel_port(&mut self, tp: TunnelPort) -> Result<bool> {
        let bss = self.skel.maps.bss_data.as_deref_mut().ok_or_else(no_bss)?;
        if bss.user_ports.contains(&tp.port) {
            return Ok(false);
        }
        let free = bss
            .user_ports
            .iter()
            .position(|p| *p == 0)
            .ok_or(Error::TooManyTunnelPorts(MAX_TUNNEL_PORTS))?;
        // The kind first: the programs read the port, then its kind.
        bss.user_port_encap[free] = tp.encap as u8;
        std::sync::atomic::fence(Ordering::Release);
        bss.user_ports[free] = tp.port;
        // Then the interfaces' bit, so a packet that sees it finds the port in place; and
        // in `options`, whose bits the interfaces watched from now on get.
        self.options.tunnel_ports.push(tp);
        self.rewrite_paths()?;
        Ok(true)
    }

    /// Writes the data plane's `path` (enum nd_path) into every watched interface's header.
    fn rewrite_paths(&self) -> Result<()> {
        let path = self.path();
        let slots: Vec<u32> = self.slots().values().copied().collect();
        for slot in slots {
            self.store_headers(slot, |values, index| {
                values.store_u8(index, std::mem::offset_of!(nd_iface_dir, path), path);
            })?;
        }
        Ok(())
    }

    /// Tells the data plane this namespace's addresses and forwarding settings again (they
    /// change: DHCP, tunnels coming up, `sysctl -w`), when it takes the local path: the
    /// addresses into `local_addrs`, then the families that can be local into every watched
    /// interface's counters (PATH_LOCAL_IN4/IN6), so a packet that sees a family's bit finds
    /// its addresses in place. The agent calls it every evaluation. On failure received
    /// segments keep what the data plane held: logged, never fatal. A packet racing with
    /// the update may be classified with the old list.
    pub fn refresh_local_addrs(&self) {
        if !self.options.local_path() {
            return;
        }
        let addrs = match LocalAddrs::read() {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!("reading this host's addresses for the local path: {e}");
                return;
            }
        };
        let value = addrs.value();
        let map = &self.skel.maps.local_addrs;
        if let Err(e) = map.update(&0u32.to_ne_bytes(), encode(&value), MapFlags::ANY) {
            tracing::warn!("BPF map local_addrs: {e}");
            return;
        }
        tracing::debug!(?addrs, usable = ?addrs.usable(), "local path addresses");
        let (v4, v6) = addrs.usable();
        let bits = if v4 { PATH_LOCAL_IN4 } else { 0 } | if v6 { PATH_LOCAL_IN6 } else { 0 };
        if self.local_in.swap(bits, Ordering::Relaxed) == bits {
            return;
        }
        if let Err(e) = self.rewrite_paths() {
            tracing::warn!("local path families into the interfaces' counters: {e}");
        }
    }
}
