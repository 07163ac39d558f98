//! Compiles every `ebpf/*.bpf.c` into a libbpf skeleton in `OUT_DIR`.
//!
//! Each program `ebpf/NAME.bpf.c` becomes `$OUT_DIR/NAME.skel.rs`, included by
//! `src/bpf.rs`. Generated skeletons are never committed.

use std::env;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let manifest =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let ebpf = manifest.join("../ebpf");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!(
            "no vendored vmlinux.h for target architecture {other}; see ebpf/vmlinux/README.md"
        ),
        Err(e) => panic!("CARGO_CFG_TARGET_ARCH: {e}"),
    };
    let include = ebpf.join("include");
    let vmlinux = ebpf.join("vmlinux").join(arch);

    let mut sources: Vec<PathBuf> = std::fs::read_dir(&ebpf)
        .expect("read ebpf/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    sources.sort();

    for src in &sources {
        let name = skeleton_name(src);
        SkeletonBuilder::new()
            .source(src)
            .clang_args([
                OsStr::new("-Wall"),
                OsStr::new("-Wno-unused-function"),
                OsStr::new("-I"),
                include.as_os_str(),
                OsStr::new("-I"),
                vmlinux.as_os_str(),
            ])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
        println!("cargo:rerun-if-changed={}", src.display());
    }
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed={}", ebpf.display());

    embed_rules(&manifest.join("../rules"), &out.join("builtin_rules.rs"));
}

/// Writes `[(file name, contents), ...]` for every `rules/*.toml`, so the built-in rules are
/// the files users read in the repository, embedded verbatim.
fn embed_rules(dir: &Path, dest: &Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|x| x == "toml"));
    files.sort();
    let mut code = String::from("&[\n");
    for f in &files {
        let name = f.file_name().and_then(OsStr::to_str).unwrap_or_default();
        let abs = f.canonicalize().expect("canonical rule path");
        code.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            abs.display().to_string()
        ));
        println!("cargo:rerun-if-changed={}", f.display());
    }
    code.push(']');
    std::fs::write(dest, code).expect("write builtin_rules.rs");
    println!("cargo:rerun-if-changed={}", dir.display());
}

fn skeleton_name(src: &Path) -> String {
    let file = src.file_name().and_then(OsStr::to_str).unwrap_or_default();
    file.trim_end_matches(".bpf.c").to_owned()
}
