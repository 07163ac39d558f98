//! The `netdoctor` binary; everything lives in the library.

fn main() -> std::process::ExitCode {
    netdoctor::cli::main()
}
