//! Compiles every `tests/bpf/*.bpf.c` into a libbpf skeleton in `OUT_DIR`, like
//! `agent/build.rs` does for `ebpf/`.
//!
//! Each program `tests/bpf/NAME.bpf.c` becomes `$OUT_DIR/NAME.skel.rs`; today only
//! `floor.bpf.c`, the empty programs `netdoctor-bench` measures as its floor. The programs
//! share netdoctor's headers (`../ebpf/include`) and vendored `vmlinux.h`.

use std::env;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let manifest =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let bpf = manifest.join("bpf");
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

    let mut sources: Vec<PathBuf> = std::fs::read_dir(&bpf)
        .expect("read tests/bpf/")
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
    println!("cargo:rerun-if-changed={}", bpf.display());
    println!("cargo:rerun-if-changed={}", include.display());
}

fn skeleton_name(src: &Path) -> String {
    let file = src.file_name().and_then(OsStr::to_str).unwrap_or_default();
    file.trim_end_matches(".bpf.c").to_owned()
}
