//! Facts about an interface and its path, read from the kernel and the tunnel daemons,
//! never guessed.

pub mod wireguard;
