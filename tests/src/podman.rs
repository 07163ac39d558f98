//! The chart's DaemonSet pod, run under podman on this machine: the container's image,
//! arguments (with `$(VAR)` expanded as the kubelet does), environment, user,
//! capabilities, seccomp profile, read-only root and mounts, in a lab namespace that
//! stands in for the node's network namespace (`hostNetwork`).
//!
//! What cannot be the same here, and what replaces it:
//! - the node's network namespace: a lab namespace (`--network ns:/run/netns/NAME`);
//! - writable hostPath volumes (the history): a temporary directory, so a test never
//!   writes the host's `/var/lib/netdoctor`; read-only ones are the host's own paths;
//! - Secret volumes: a temporary directory holding the token, laid out as the kubelet
//!   does (`KEY -> ..data/KEY`, `..data -> ..TIMESTAMP`, a sticky directory), with the
//!   volume's mode;
//! - `seccompProfile: RuntimeDefault`: podman's default profile plus what containerd's
//!   (≥ 1.7) adds, `bpf` with CAP_BPF and `perf_event_open` with CAP_PERFMON; podman 4.3's
//!   own allows them only with CAP_SYS_ADMIN;
//! - capabilities this machine's bounding set lacks (it has no CAP_SYS_RESOURCE) cannot
//!   be given to a container: [`PodRun::missing_caps`] names them.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

use crate::chart;
use crate::cmd;
use crate::netns::Netns;

/// podman 4.3's default seccomp profile (Debian package golang-github-containers-common).
const PODMAN_SECCOMP: &str = "/usr/share/containers/seccomp.json";

/// Capability numbers of the names a chart may add.
const CAPS: &[(&str, u32)] = &[
    ("DAC_READ_SEARCH", 2),
    ("NET_ADMIN", 12),
    ("NET_RAW", 13),
    ("SYS_PTRACE", 19),
    ("SYS_RESOURCE", 24),
    ("PERFMON", 38),
    ("BPF", 39),
];

/// Runs podman with `args` (crun cannot run containers on this machine's hybrid cgroup
/// hierarchy; runc can).
pub fn podman(args: &[&str]) -> Result<String> {
    let mut all = vec!["--runtime", "runc"];
    all.extend_from_slice(args);
    let mut command = Command::new("podman");
    command.args(&all);
    let out = cmd::output_timeout(&mut command, Duration::from_secs(120))?;
    ensure!(
        out.status.success(),
        "`podman {}` failed ({}): {}",
        all.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether podman's storage holds `image`.
pub fn image_exists(image: &str) -> bool {
    Command::new("podman")
        .args(["image", "exists", image])
        .status()
        .is_ok_and(|s| s.success())
}

/// A container running the chart's DaemonSet pod; removed on `Drop`.
#[derive(Debug)]
pub struct PodRun {
    /// The container's name.
    pub name: String,
    /// The agent's arguments after `$(VAR)` expansion.
    pub args: Vec<String>,
    /// The token the Secret volume holds.
    pub token: String,
    /// The token file on this machine (for Prometheus' `credentials_file`).
    pub token_file: PathBuf,
    /// Capabilities the chart adds that this machine cannot give.
    pub missing_caps: Vec<String>,
    _dirs: Vec<tempfile::TempDir>,
}

/// The seccomp profile standing in for `RuntimeDefault` (see the module's note).
fn runtime_default_profile(dir: &Path) -> Result<PathBuf> {
    let text = std::fs::read_to_string(PODMAN_SECCOMP)
        .with_context(|| format!("reading {PODMAN_SECCOMP}"))?;
    let mut profile: Value = serde_json::from_str(&text).context("parsing the profile")?;
    let syscalls = profile["syscalls"]
        .as_array_mut()
        .context("the profile has no syscalls")?;
    // Podman's profile also refuses both explicitly without CAP_SYS_ADMIN, and a refusal
    // wins over an allowance: containerd's has no such rule.
    for rule in syscalls.iter_mut() {
        if rule["action"] != "SCMP_ACT_ALLOW" {
            if let Some(names) = rule["names"].as_array_mut() {
                names.retain(|n| n != "bpf" && n != "perf_event_open");
            }
        }
    }
    syscalls.retain(|r| r["names"].as_array().is_none_or(|n| !n.is_empty()));
    for (name, cap) in [("bpf", "CAP_BPF"), ("perf_event_open", "CAP_PERFMON")] {
        syscalls.push(
            json!({"names": [name], "action": "SCMP_ACT_ALLOW", "includes": {"caps": [cap]}}),
        );
    }
    let path = dir.join("seccomp.json");
    std::fs::write(&path, serde_json::to_vec(&profile)?)?;
    Ok(path)
}

fn bounding_set() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .context("no CapBnd")?;
    Ok(u64::from_str_radix(hex.trim(), 16)?)
}

impl PodRun {
    /// Starts `image` as the only container of `daemonset`'s pod, in `ns`, as if on a
    /// node named `node_name` whose address is `pod_ip`. Does not wait for anything.
    pub fn start(
        daemonset: &Value,
        image: &str,
        ns: &Netns,
        pod_ip: &str,
        node_name: &str,
    ) -> Result<PodRun> {
        let pod = &daemonset["spec"]["template"]["spec"];
        ensure!(
            pod["hostNetwork"] == true,
            "the DaemonSet must use hostNetwork"
        );
        let containers = pod["containers"].as_array().context("no containers")?;
        ensure!(
            containers.len() == 1,
            "expected one container, found {}",
            containers.len()
        );
        let c = &containers[0];
        let name = format!("ndimage-{}", std::process::id());
        let mut dirs = Vec::new();
        let scratch = tempfile::Builder::new().prefix("ndimage-").tempdir()?;
        let mut run: Vec<String> = ["run", "-d", "--name", &name].map(str::to_owned).to_vec();
        run.push(format!("--network=ns:{}", ns.path().display()));
        // No CAP_SYS_RESOURCE here: podman's default limits (1048576 files) cannot be set.
        run.extend(["--ulimit=nofile=4096:4096", "--ulimit=nproc=4096:4096"].map(str::to_owned));
        if let Some(grace) = pod["terminationGracePeriodSeconds"].as_u64() {
            run.push(format!("--stop-timeout={grace}"));
        }

        let mut env = BTreeMap::new();
        for e in c["env"].as_array().into_iter().flatten() {
            let key = chart::str_at(e, "/name")?.to_owned();
            let value = match e
                .pointer("/valueFrom/fieldRef/fieldPath")
                .and_then(Value::as_str)
            {
                Some("status.podIP") => pod_ip.to_owned(),
                Some("spec.nodeName") => node_name.to_owned(),
                Some(other) => bail!("env {key}: fieldRef {other} is not emulated"),
                None => e["value"].as_str().unwrap_or_default().to_owned(),
            };
            run.push(format!("--env={key}={value}"));
            env.insert(key, value);
        }

        let sc = &c["securityContext"];
        ensure!(
            sc["privileged"] != true,
            "the container must not be privileged"
        );
        let user = sc["runAsUser"].as_u64().unwrap_or(0);
        let group = sc["runAsGroup"].as_u64().unwrap_or(user);
        run.push(format!("--user={user}:{group}"));
        let drops: Vec<&str> = sc["capabilities"]["drop"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        ensure!(
            drops == ["ALL"],
            "the container must drop ALL capabilities, drops {drops:?}"
        );
        run.push("--cap-drop=all".to_owned());
        let bounding = bounding_set()?;
        let mut missing_caps = Vec::new();
        for cap in sc["capabilities"]["add"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let bit = CAPS
                .iter()
                .find(|(n, _)| *n == cap)
                .map(|(_, b)| *b)
                .with_context(|| format!("unknown capability {cap}"))?;
            if bounding & (1 << bit) == 0 {
                missing_caps.push(cap.to_owned());
            } else {
                run.push(format!("--cap-add={cap}"));
            }
        }
        if sc["allowPrivilegeEscalation"] == false {
            run.push("--security-opt=no-new-privileges".to_owned());
        }
        if sc["readOnlyRootFilesystem"] == true {
            // Kubernetes mounts nothing writable of its own: neither does podman, then.
            run.extend(["--read-only", "--read-only-tmpfs=false"].map(str::to_owned));
        }
        match sc.pointer("/seccompProfile/type").and_then(Value::as_str) {
            Some("RuntimeDefault") => run.push(format!(
                "--security-opt=seccomp={}",
                runtime_default_profile(scratch.path())?.display()
            )),
            Some("Unconfined") => run.push("--security-opt=seccomp=unconfined".to_owned()),
            other => bail!("seccompProfile {other:?} is not emulated"),
        }

        let volumes = pod["volumes"].as_array().context("no volumes")?;
        let mut token = None;
        for m in c["volumeMounts"].as_array().into_iter().flatten() {
            let vname = chart::str_at(m, "/name")?;
            let target = chart::str_at(m, "/mountPath")?;
            let ro = m["readOnly"] == true;
            let v = volumes
                .iter()
                .find(|v| v["name"] == vname)
                .with_context(|| format!("no volume {vname}"))?;
            if let Some(path) = v.pointer("/hostPath/path").and_then(Value::as_str) {
                if ro {
                    if v["hostPath"]["type"] == "DirectoryOrCreate" {
                        std::fs::create_dir_all(path)?;
                    }
                    run.push(format!("--volume={path}:{target}:ro"));
                } else {
                    let dir = tempfile::Builder::new().prefix("ndimage-host-").tempdir()?;
                    run.push(format!("--volume={}:{target}", dir.path().display()));
                    dirs.push(dir);
                }
            } else if v.get("emptyDir").is_some() {
                run.push(format!("--tmpfs={target}:rw,mode=1777"));
            } else if let Some(secret) = v.get("secret") {
                let dir = tempfile::Builder::new()
                    .prefix("ndimage-secret-")
                    .tempdir()?;
                let mode = secret["defaultMode"].as_u64().unwrap_or(0o644) as u32;
                let value = format!("{:032x}", rand_u128()?);
                for arg in &c["args"].as_array().cloned().unwrap_or_default() {
                    if let Some(file) = arg.as_str().and_then(|a| a.strip_prefix("--token-file=")) {
                        let key = file
                            .strip_prefix(&format!("{target}/"))
                            .with_context(|| format!("--token-file {file} is not in {target}"))?;
                        let path = secret_file(dir.path(), key, &value, mode)?;
                        token = Some((value.clone(), path));
                    }
                }
                run.push(format!("--volume={}:{target}:ro", dir.path().display()));
                dirs.push(dir);
            } else {
                bail!("volume {vname}: only hostPath, emptyDir and secret are emulated: {v}");
            }
        }
        let (token, token_file) =
            token.context("no --token-file argument reads a Secret volume")?;

        let args: Vec<String> = c["args"]
            .as_array()
            .context("no args")?
            .iter()
            .filter_map(Value::as_str)
            .map(|a| chart::expand(a, &env))
            .collect();
        run.push(image.to_owned());
        run.extend(args.iter().cloned());
        dirs.push(scratch);
        let refs: Vec<&str> = run.iter().map(String::as_str).collect();
        podman(&refs)?;
        Ok(PodRun {
            name,
            args,
            token,
            token_file,
            missing_caps,
            _dirs: dirs,
        })
    }

    /// The container's main process id on this machine.
    pub fn pid(&self) -> Result<u32> {
        let out = podman(&["inspect", "--format", "{{.State.Pid}}", &self.name])?;
        out.trim().parse().with_context(|| format!("pid {out:?}"))
    }

    /// Whether the container is still running.
    pub fn running(&self) -> bool {
        podman(&["inspect", "--format", "{{.State.Running}}", &self.name])
            .is_ok_and(|s| s.trim() == "true")
    }

    /// The memory cgroup's usage and peak in bytes (cgroup v1 `memory.usage_in_bytes` and
    /// `memory.max_usage_in_bytes`, v2 `memory.current` and `memory.peak`): the process'
    /// pages plus the kernel memory charged to it, BPF maps included (Linux >= 5.11).
    pub fn memory_cgroup(&self) -> Result<(u64, Option<u64>)> {
        let cgroups = std::fs::read_to_string(format!("/proc/{}/cgroup", self.pid()?))?;
        let read =
            |p: String| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
        for line in cgroups.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if controllers.split(',').any(|c| c == "memory") {
                let dir = format!("/sys/fs/cgroup/memory{path}");
                if let Some(now) = read(format!("{dir}/memory.usage_in_bytes")) {
                    return Ok((now, read(format!("{dir}/memory.max_usage_in_bytes"))));
                }
            } else if controllers.is_empty() {
                let dir = format!("/sys/fs/cgroup{path}");
                if let Some(now) = read(format!("{dir}/memory.current")) {
                    return Ok((now, read(format!("{dir}/memory.peak"))));
                }
            }
        }
        bail!("no memory cgroup for the container in {cgroups:?}")
    }

    /// What the container printed.
    pub fn logs(&self) -> String {
        Command::new("podman")
            .args(["logs", &self.name])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr)
            })
            .unwrap_or_default()
    }

    /// `podman stop` (SIGTERM, SIGKILL after the grace period) and the exit code.
    pub fn stop(&self) -> Result<i64> {
        podman(&["stop", &self.name])?;
        let code = podman(&["inspect", "--format", "{{.State.ExitCode}}", &self.name])?;
        code.trim()
            .parse()
            .with_context(|| format!("exit code {code:?}"))
    }
}

impl Drop for PodRun {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rm", "-f", "-t", "0", &self.name])
            .output();
    }
}

fn rand_u128() -> Result<u128> {
    let mut bytes = [0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
    Ok(u128::from_le_bytes(bytes))
}

/// Writes `value` under `key` in Secret volume `dir` as the kubelet's atomic writer lays
/// it out: the file (mode `mode`, root's) in a timestamped directory, `..data` linking to
/// that directory, `key` linking to `..data/key`, the volume's root sticky and writable by
/// all (the tmpfs the kubelet mounts). Returns the path of `key`.
fn secret_file(dir: &Path, key: &str, value: &str, mode: u32) -> Result<PathBuf> {
    const DATA: &str = "..2026_01_01_00_00_00.000000001";
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777))?;
    std::fs::create_dir_all(dir.join(DATA))?;
    let file = dir.join(DATA).join(key);
    std::fs::write(&file, value)?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode))?;
    if !dir.join("..data").exists() {
        std::os::unix::fs::symlink(DATA, dir.join("..data"))?;
    }
    let path = dir.join(key);
    std::os::unix::fs::symlink(format!("..data/{key}"), &path)?;
    Ok(path)
}
