//! The rule files the commands load, at the limits: files that are not regular files, and
//! expressions past what `rules check` bounds, refused at once naming what to fix.

use super::*;

/// A rule file whose condition is `condition`.
fn rule_file(id: &str, condition: &str) -> String {
    format!(
        "id = \"{id}\"\nseverity = \"info\"\nscope = \"interface\"\ncondition = '''{condition}'''\n\
         summary = \"s\"\nfix = \"f\"\n"
    )
}

/// `netdoctor ARGS` must exit 3 within a second, naming every one of `needles`.
fn refused_within_a_second(args: &[&str], needles: &[&str]) -> Result<()> {
    let started = std::time::Instant::now();
    let stderr = expect_usage_error(args, needles)?;
    let took = started.elapsed();
    ensure!(
        took < Duration::from_secs(1),
        "`netdoctor {}` took {took:?}: {stderr}",
        args.join(" ")
    );
    Ok(())
}

/// A `*.toml` that is a FIFO or a link to `/dev/zero` is refused at once by every command
/// that loads rules, naming the file; the same directory with a regular file loads.
#[test]
fn rule_files_that_are_not_regular_files_are_refused_at_once() -> Result<()> {
    let fifo_dir = tempfile::tempdir()?;
    let fifo = fifo_dir.path().join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))?;
    let zero_dir = tempfile::tempdir()?;
    std::os::unix::fs::symlink("/dev/zero", zero_dir.path().join("x.toml"))?;
    for (dir, what) in [
        (fifo_dir.path(), "is a FIFO"),
        (zero_dir.path(), "is a character device"),
    ] {
        let dir = dir.to_str().unwrap_or_default();
        let needles = [what, "not a regular file"];
        refused_within_a_second(&["rules", "check", dir], &needles)?;
        refused_within_a_second(&["rules", "list", "--rules", dir], &needles)?;
        refused_within_a_second(&["diagnose", "lo", "--rules", dir], &needles)?;
    }
    // The healthy twin: the FIFO replaced by a regular file.
    std::fs::remove_file(&fifo)?;
    std::fs::write(&fifo, rule_file("site.fine", "iface.mtu > 0"))?;
    let out = run(&[
        "rules",
        "check",
        fifo_dir.path().to_str().unwrap_or_default(),
    ])?;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "1 rules OK");
    Ok(())
}

/// Expressions that would overflow a thread's stack or take seconds and gigabytes per
/// evaluation are refused with exit 3 and the limit they pass; the largest accepted ones
/// load and evaluate.
#[test]
fn rules_check_bounds_each_expression() -> Result<()> {
    let ten = "[0,1,2,3,4,5,6,7,8,9]";
    let mut nested_map = "a".to_owned();
    for v in ["f", "e", "d", "c", "b", "a"] {
        nested_map = format!("{ten}.map({v},{nested_map})");
    }
    let cases = [
        (
            format!("{}1 > 0", "1 + ".repeat(2_000)),
            "8005 bytes long, more than the 4096",
        ),
        (
            format!("{}1 > 0", "1 + ".repeat(5_000)),
            "bytes long, more than the 4096",
        ),
        (
            format!("{}1{} > 0", "(".repeat(100_000), ")".repeat(100_000)),
            "KiB, more than the 64 KiB a rule file may have",
        ),
        (
            format!("{}1{} > 0", "(".repeat(25), ")".repeat(25)),
            "nests brackets 25 deep, more than the 24",
        ),
        (
            format!("{}1 > 0", "1+".repeat(300)),
            "301 operators, more than the 256",
        ),
        (
            format!("{}1 > 0", "1 + ".repeat(127)),
            "levels deep, more than the 128",
        ),
        (
            format!("{nested_map}.size() > 0"),
            "operations to evaluate, more than the 1,000,000 a rule may",
        ),
    ];
    for (condition, needle) in &cases {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("x.toml"), rule_file("site.x", condition))?;
        let dir = dir.path().to_str().unwrap_or_default();
        let stderr = expect_usage_error(&["rules", "check", dir], &[needle, "x.toml"])?;
        ensure!(stderr.lines().count() == 1, "one error: {stderr}");
    }

    // The largest of each shape: they load, and evaluate (each condition holds).
    let mut exists = format!("{}1 > 0", "1 + ".repeat(32));
    for i in 0..24 {
        exists = format!("[{i}].exists(a{i}, {exists})");
    }
    let accepted = [
        format!("{}1 > 0", "1 + ".repeat(126)),
        format!(
            "{}{}1{} > 0",
            "(".repeat(24),
            "1 + ".repeat(126),
            ")".repeat(24)
        ),
        exists,
        format!("{}1{} > 0", "int(".repeat(24), ")".repeat(24)),
        format!("{}true", "false ? false : ".repeat(95)),
    ];
    let dir = tempfile::tempdir()?;
    for (i, condition) in accepted.iter().enumerate() {
        std::fs::write(
            dir.path().join(format!("r{i}.toml")),
            rule_file(&format!("site.r{i}"), condition),
        )?;
    }
    let out = run(&["rules", "check", dir.path().to_str().unwrap_or_default()])?;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "5 rules OK");
    Ok(())
}
