//! Running a parsed command line: logging, the runtime, each command, and its exit code.

use std::process::ExitCode;

use clap::Parser;

use super::{diagnose_cmd, drops, flows, probe, rules, shutdown, wireguard};
use super::{AgentArgs, Cli, Command, EXIT_UNKNOWN};

/// `netdoctor agent`, which handles SIGTERM and SIGINT itself.
async fn agent(args: AgentArgs) -> anyhow::Result<ExitCode> {
    let config = crate::daemon::config::Config::resolve(&args.settings)?;
    let mut options = args.dataplane.options()?;
    // The flag (or its variable) wins over the configuration file's key.
    if let (None, Some(n)) = (args.dataplane.max_flows, config.max_flows) {
        options.max_flows = n;
    }
    crate::daemon::run(config, options).await?;
    Ok(ExitCode::SUCCESS)
}

/// Entry point of the `netdoctor` binary.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_UNKNOWN)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    super::logging::init(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("netdoctor: cannot start: {e}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    let result = match cli.command {
        Command::Rules(args) => rules::run(args),
        Command::Agent(args) => runtime.block_on(agent(*args)),
        // The one-shot commands: SIGINT and SIGTERM detach and exit 130 and 143.
        Command::Diagnose(args) => shutdown::run(runtime, |i| diagnose_cmd::run(args, i)),
        Command::Flows(args) => shutdown::run(runtime, |stop| flows::run(args, stop)),
        Command::Drops(args) => shutdown::run(runtime, |stop| drops::run(args, stop)),
        Command::Probe(args) => shutdown::run(runtime, |_| probe::run(args)),
        Command::Wireguard(args) => shutdown::run(runtime, |_| wireguard::run(args)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("netdoctor: {e:#}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}
