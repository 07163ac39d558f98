//! `netdoctor rules list|check|eval`: show, validate and try diagnostic rules.

use std::process::ExitCode;

use super::{RulesArgs, RulesCommand};
use crate::facts::Facts;
use crate::rules::RuleSet;

/// Runs on a thread with the stack the agent evaluates rules on
/// ([`crate::rules::EVAL_STACK_SIZE`]), so what `rules check` accepts is what the agent runs.
pub(super) fn run(args: RulesArgs) -> anyhow::Result<ExitCode> {
    std::thread::Builder::new()
        .name("rules".into())
        .stack_size(crate::rules::EVAL_STACK_SIZE)
        .spawn(move || run_here(args))
        .map_err(|e| anyhow::anyhow!("starting the rules thread: {e}"))?
        .join()
        .map_err(|_| anyhow::anyhow!("the rules thread panicked"))?
}

fn run_here(args: RulesArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        RulesCommand::List { rules } => {
            let set = match &rules {
                Some(dir) => RuleSet::with_user_dir(dir),
                None => RuleSet::builtin(),
            };
            let set = set.map_err(|errors| anyhow::anyhow!("{}", join(&errors)))?;
            for r in set.rules() {
                println!(
                    "{:<30} {:<8} {:<9} {}",
                    r.id,
                    r.severity.to_string(),
                    format!("{:?}", r.scope).to_lowercase(),
                    r.origin
                );
                if !r.description.is_empty() {
                    for line in r.description.trim().lines() {
                        println!("    {line}");
                    }
                }
                if let Some(when) = r.critical_when_source() {
                    println!("    critical when: {}", when.trim());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        RulesCommand::Eval {
            report,
            rules,
            only,
            json,
        } => super::rules_eval::run(&report, rules.as_deref(), &only, json),
        RulesCommand::Check { dir } => {
            let set = match dir.as_deref() {
                Some(d) => RuleSet::load_dir(d),
                None => RuleSet::builtin(),
            };
            let errors = match set {
                Ok(set) => {
                    let errors = set.check(&Facts::sample().to_json());
                    if errors.is_empty() {
                        println!("{} rules OK", set.rules().len());
                        return Ok(ExitCode::SUCCESS);
                    }
                    errors
                }
                Err(errors) => errors,
            };
            eprintln!("{}", join(&errors));
            Ok(ExitCode::from(super::EXIT_UNKNOWN))
        }
    }
}

fn join(errors: &[crate::rules::RuleError]) -> String {
    errors
        .iter()
        .map(|e| format!("error: {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}
