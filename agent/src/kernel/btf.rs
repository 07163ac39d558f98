//! Questions answered from the running kernel's BTF: which tracepoints and iterators
//! exist (so optional programs can be skipped with a message instead of failing the load),
//! and the names of enum values such as drop reasons.

use std::collections::BTreeMap;

use libbpf_rs::btf::types::Enum;
use libbpf_rs::btf::Btf;

/// The kernel's BTF, if it has any.
pub fn vmlinux() -> Option<Btf<'static>> {
    Btf::from_vmlinux().ok()
}

/// True if the kernel has the BTF-enabled tracepoint `name` (tp_btf/NAME).
pub fn has_tracepoint(btf: &Btf<'_>, name: &str) -> bool {
    has_type(btf, &format!("btf_trace_{name}"))
}

/// True if the kernel has the BPF iterator `name` (iter/NAME).
pub fn has_iterator(btf: &Btf<'_>, name: &str) -> bool {
    has_type(btf, &format!("bpf_iter__{name}"))
}

/// True if the kernel has function `name` in its BTF (a kfunc programs may call).
pub fn has_kfunc(btf: &Btf<'_>, name: &str) -> bool {
    has_type(btf, name)
}

/// Number of arguments of BTF tracepoint `name` (without the leading context pointer),
/// e.g. to know whether this kernel's tcp_retransmit_skb passes `err`.
pub fn tracepoint_args(btf: &Btf<'_>, name: &str) -> Option<usize> {
    use libbpf_rs::btf::types::FuncProto;
    let typedef = btf.type_by_name::<libbpf_rs::btf::BtfType<'_>>(&format!("btf_trace_{name}"))?;
    let proto = typedef.next_type()?.next_type()?;
    let proto = FuncProto::try_from(proto).ok()?;
    Some(proto.len().saturating_sub(1))
}

fn has_type(btf: &Btf<'_>, name: &str) -> bool {
    btf.type_by_name::<libbpf_rs::btf::BtfType<'_>>(name)
        .is_some()
}

/// Values of a C enum by number, with `strip_prefix` removed from the names
/// (e.g. `skb_drop_reason` with "SKB_DROP_REASON_").
pub fn enum_names(btf: &Btf<'_>, enum_name: &str, strip_prefix: &str) -> BTreeMap<u32, String> {
    let Some(e) = btf.type_by_name::<Enum<'_>>(enum_name) else {
        return BTreeMap::new();
    };
    e.iter()
        .filter_map(|m| {
            let name = m.name?.to_string_lossy();
            let value = u32::try_from(m.value).ok()?;
            Some((
                value,
                name.strip_prefix(strip_prefix).unwrap_or(&name).to_owned(),
            ))
        })
        .collect()
}
