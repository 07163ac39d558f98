//! What a rule may be: the size of its file.

/// Largest rule file, in bytes: a rule is a few KiB of TOML.
pub const MAX_RULE_FILE: u64 = 64 * 1024;
