//! Logging setup: `tracing` to stderr, with libbpf's own messages routed through it.

use libbpf_rs::PrintLevel;

/// Installs the subscriber. `verbose`: 0 warnings, 1 info, 2+ debug; `RUST_LOG` overrides.
pub fn init(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    route_libbpf();
}

/// Sends libbpf's messages to `tracing` at info/debug level. libbpf warns about expected
/// conditions (a missing clsact qdisc while looking for leftovers) and prints verifier logs
/// that only matter when a load fails, so they appear with `-v`, not by default.
pub fn route_libbpf() {
    fn print(level: PrintLevel, msg: String) {
        let msg = msg.trim_end();
        match level {
            PrintLevel::Warn | PrintLevel::Info => tracing::info!(target: "libbpf", "{msg}"),
            PrintLevel::Debug => tracing::debug!(target: "libbpf", "{msg}"),
        }
    }
    libbpf_rs::set_print(Some((PrintLevel::Debug, print)));
}
