// Shared by `agent/build.rs` and `tests/build.rs` (through `include!`): compiles every
// `*.bpf.c` of a directory into a libbpf-rs skeleton in `OUT_DIR`, against netdoctor's
// headers (`ebpf/include`) and the vendored `vmlinux.h` of the target architecture.

/// Compiles `dir/NAME.bpf.c` into `$OUT_DIR/NAME.skel.rs` for every such file. `ebpf` is
/// the repository's `ebpf/` directory.
fn build_skeletons(dir: &std::path::Path, ebpf: &std::path::Path) {
    use std::ffi::OsStr;

    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target = std::env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let include = ebpf.join("include");
    let vmlinux = vmlinux_dir(ebpf, &target);

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
                // BPF ISA v3 (Linux 5.1; every supported kernel has it): 32-bit arithmetic
                // and jumps, without the shift pairs v1 needs to zero-extend each 32-bit
                // value. clang 14's default is v1; v3 makes nd_tc_ingress 7 % shorter.
                OsStr::new("-mcpu=v3"),
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
    println!("cargo:rerun-if-changed={}", vmlinux.display());
}

/// The folder holding the vendored `vmlinux.h` of Rust target architecture `target`, named
/// as the kernel (and libbpf-cargo's `__TARGET_ARCH_`) names the architecture. Fails the
/// build with how to generate the file when it is not vendored, rather than leaving clang
/// to report a missing include deep inside the first program.
fn vmlinux_dir(ebpf: &std::path::Path, target: &str) -> std::path::PathBuf {
    let arch = match target {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        "riscv64" => "riscv",
        "powerpc64" => "powerpc",
        "s390x" => "s390",
        "loongarch64" => "loongarch",
        other => other,
    };
    let dir = ebpf.join("vmlinux").join(arch);
    if !dir.join("vmlinux.h").is_file() {
        panic!(
            "no vendored vmlinux.h for target architecture {target}: {} does not exist.\n\
             Generate it on a machine of that architecture whose kernel has BTF:\n\
             \n    mkdir -p ebpf/vmlinux/{arch}\n    \
             bpftool btf dump file /sys/kernel/btf/vmlinux format c > ebpf/vmlinux/{arch}/vmlinux.h\n\n\
             then build again; ebpf/vmlinux/README.md says more.",
            dir.join("vmlinux.h").display()
        );
    }
    dir
}
