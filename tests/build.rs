//! Compiles every `tests/bpf/*.bpf.c` into a libbpf skeleton in `OUT_DIR`, with the same
//! helper as `agent/build.rs`. Today only `floor.bpf.c`: the empty programs
//! `netdoctor-bench` measures as its floor.

include!("../ebpf/build_skeletons.rs");

fn main() {
    let manifest = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    build_skeletons(&manifest.join("bpf"), &manifest.join("../ebpf"));
}
