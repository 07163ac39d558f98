// Shared by `agent/build.rs` and `tests/build.rs` (through `include!`): compiles every
// `*.bpf.c` of a directory into a libbpf-rs skeleton in `OUT_DIR`, against netdoctor's
// headers (`ebpf/include`) and the vendored `vmlinux.h` of the target architecture.

/// Compiles `dir/NAME.bpf.c` into `$OUT_DIR/NAME.skel.rs` for every such file. `ebpf` is
/// the repository's `ebpf/` directory.
fn build_skeletons(dir: &std::path::Path, ebpf: &std::path::Path) {
    use std::ffi::OsStr;

    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("no vendored vmlinux.h for target architecture {other}; see ebpf/vmlinux/README.md"),
        Err(e) => panic!("CARGO_CFG_TARGET_ARCH: {e}"),
    };
    let include = ebpf.join("include");
    let vmlinux = ebpf.join("vmlinux").join(arch);

    let mut sources: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    sources.sort();

    for src in &sources {
        let file = src.file_name().and_then(OsStr::to_str).unwrap_or_default();
        let name = file.trim_end_matches(".bpf.c");
        libbpf_cargo::SkeletonBuilder::new()
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
    println!("cargo:rerun-if-changed={}", dir.display());
    println!("cargo:rerun-if-changed={}", include.display());
}
