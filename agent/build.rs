//! Compiles every `ebpf/*.bpf.c` into a libbpf skeleton in `OUT_DIR`.
//!
//! Each program `ebpf/NAME.bpf.c` becomes `$OUT_DIR/NAME.skel.rs`, included by
//! `src/bpf.rs`. Generated skeletons are never committed.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

include!("../ebpf/build_skeletons.rs");

fn main() {
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let ebpf = manifest.join("../ebpf");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    build_skeletons(&ebpf, &ebpf);
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
