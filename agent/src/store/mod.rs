//! History in SQLite: findings with their lifecycle, and per-interface samples.
