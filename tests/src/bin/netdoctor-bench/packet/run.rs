//! What one iperf3 run of the packet section attached and measured: hooks, whose program,
//! per-program statistics, netdoctor's own counters.

use serde_json::Value;

use crate::args::Config;
use crate::lab::NetPath;

/// Hook a measured program runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Hook {
    Xdp,
    TcIn,
    TcOut,
}

impl Hook {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Hook::Xdp => "xdp",
            Hook::TcIn => "tc-in",
            Hook::TcOut => "tc-out",
        }
    }

    pub(crate) fn from_netdoctor_name(name: &str) -> Option<Hook> {
        match name {
            "nd_xdp_ingress" => Some(Hook::Xdp),
            "nd_tc_ingress" => Some(Hook::TcIn),
            "nd_tc_egress" => Some(Hook::TcOut),
            _ => None,
        }
    }

    pub(crate) fn ingress(self) -> bool {
        self != Hook::TcOut
    }
}

/// Whose program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Netdoctor,
    Floor,
    /// NetObserv's flow programs (see `peer`), behind the floor and netdoctor.
    Peer,
}

/// What a run has attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Baseline,
    /// netdoctor in this configuration, plus the empty tc programs in front of it (and, on
    /// tc, NetObserv's behind it).
    Netdoctor(Config),
    /// Only the empty programs, in the configuration's hook layout (XDP floor runs).
    Floor(Config),
}

impl Kind {
    pub(crate) fn label(self) -> String {
        match self {
            Kind::Baseline => "baseline".into(),
            Kind::Netdoctor(c) => c.name().into(),
            Kind::Floor(c) => format!("floor-{}", c.name()),
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Kind::Baseline => "baseline (nothing attached)",
            Kind::Netdoctor(c) => c.describe(),
            Kind::Floor(c) => c.describe_floor(),
        }
    }
}

/// One program measured over one iperf3 run.
#[derive(Debug, Clone)]
pub(crate) struct ProgRun {
    pub(crate) role: Role,
    pub(crate) hook: Hook,
    pub(crate) name: String,
    pub(crate) id: u32,
    pub(crate) runs: u64,
    pub(crate) run_time_ns: u64,
}

impl ProgRun {
    pub(crate) fn ns_per_run(&self) -> Option<f64> {
        (self.runs > 0).then(|| self.run_time_ns as f64 / self.runs as f64)
    }
}

/// Packets and segments one direction of netdoctor's counters saw.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DirCount {
    pub(crate) packets: u64,
    pub(crate) segments: u64,
}

impl DirCount {
    pub(crate) fn from_json(v: &Value) -> DirCount {
        let u = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        DirCount {
            packets: u("packets"),
            segments: u("segments"),
        }
    }

    pub(crate) fn segments_per_packet(self) -> Option<f64> {
        (self.packets > 0).then(|| self.segments as f64 / self.packets as f64)
    }
}

/// The result of one iperf3 run.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    /// The path of the lab it ran in.
    pub(crate) path: NetPath,
    pub(crate) kind: Kind,
    pub(crate) round: u32,
    pub(crate) parallel: u32,
    /// iperf3 test length.
    pub(crate) secs: u32,
    /// Wall-clock time of the whole run (netdoctor start and stop included).
    pub(crate) duration_s: f64,
    pub(crate) gbps: f64,
    pub(crate) retransmits: Option<u64>,
    pub(crate) programs: Vec<ProgRun>,
    /// `counters.ingress` / `counters.egress` of netdoctor's JSON report.
    pub(crate) counters: Option<(DirCount, DirCount)>,
    pub(crate) flows_total: Option<u64>,
    /// The hooks netdoctor reported (`hooks.ingress`).
    pub(crate) ingress_hook: Option<String>,
    /// CPU time the machine spent busy during the iperf3 run (see [`cpu_busy_ns`]).
    pub(crate) cpu_busy_ns: Option<u64>,
}

impl Run {
    pub(crate) fn prog(&self, role: Role, hook: Hook) -> Option<&ProgRun> {
        self.programs
            .iter()
            .find(|p| p.role == role && p.hook == hook)
    }

    pub(crate) fn segments_per_run(&self, hook: Hook) -> Option<f64> {
        let (ingress, egress) = self.counters?;
        if hook.ingress() {
            ingress.segments_per_packet()
        } else {
            egress.segments_per_packet()
        }
    }
}
