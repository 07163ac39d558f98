//! The crate's shape, checked: the folders of `agent/src` are layers, each using only
//! those before it (`kernel → config → facts → rules → diagnose → daemon → cli`), and no
//! file depends on itself through others (no module cycle).
//!
//! The check reads the sources: every `use` of `crate::`, `super::` or `self::` (groups
//! expanded) and every such path in code, resolved to the file of the longest module it
//! names. A folder's `mod.rs` (or `name.rs` beside a `name/` folder) and the files below
//! it are one module to the rest of the crate: its files use the types their parent
//! declares and the parent calls them, so edges between a module and its own submodules
//! are not cycles. Every other edge between two files is.

mod parse;

use std::collections::{BTreeMap, BTreeSet};

use parse::{edges, Edge, Source};

/// The layers, lowest first; a file may use its own layer and those before it.
const LAYERS: [&str; 7] = [
    "kernel", "config", "facts", "rules", "diagnose", "daemon", "cli",
];

/// Helpers any layer may use; they use no layer.
const SHARED: [&str; 3] = ["duration", "testing", "layers"];

/// The layer of a file: its index in [`LAYERS`], `None` for a shared helper.
fn layer(file: &str) -> Option<usize> {
    let top = file
        .strip_prefix("agent/src/")?
        .split('/')
        .next()?
        .trim_end_matches(".rs");
    if SHARED.contains(&top) {
        return None;
    }
    Some(LAYERS.iter().position(|l| *l == top).unwrap_or_else(|| {
        panic!("{file}: `{top}` is not a layer; add it to LAYERS or SHARED in layers.rs")
    }))
}

/// Uses against the layer order, one message each.
fn against_layers(edges: &[Edge]) -> Vec<String> {
    let mut out = Vec::new();
    for e in edges {
        let (from, to) = (layer(&e.from), layer(&e.to));
        let wrong = match (from, to) {
            (Some(a), Some(b)) => b > a,
            (None, Some(_)) => true,
            _ => false,
        };
        if wrong {
            let name = |l: Option<usize>| l.map_or("a shared helper", |l| LAYERS[l]);
            out.push(format!(
                "{}:{}: `{}` makes {} use {} ({}), against the layer order {}",
                e.from,
                e.line,
                e.path,
                name(from),
                name(to),
                e.to,
                LAYERS.join(" → ")
            ));
        }
    }
    out
}

/// Whether one file's module contains the other's (a folder and its files).
fn nested(a: &Source, b: &Source) -> bool {
    a.module.starts_with(&b.module) || b.module.starts_with(&a.module)
}

/// Cycles between files (one per strongly connected set), each as the chain of uses.
fn cycles(sources: &[Source], edges: &[Edge]) -> Vec<String> {
    let by_file: BTreeMap<&str, &Source> = sources.iter().map(|s| (s.file.as_str(), s)).collect();
    let mut graph: BTreeMap<&str, BTreeMap<&str, &Edge>> = BTreeMap::new();
    for e in edges {
        let (Some(a), Some(b)) = (by_file.get(e.from.as_str()), by_file.get(e.to.as_str())) else {
            continue;
        };
        if !nested(a, b) {
            graph.entry(&e.from).or_default().entry(&e.to).or_insert(e);
        }
    }
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for start in graph.keys() {
        if reported.contains(start) {
            continue;
        }
        if let Some(chain) = path_back(&graph, start) {
            let text: Vec<String> = chain
                .iter()
                .map(|e| format!("{}:{} uses {} (`{}`)", e.from, e.line, e.to, e.path))
                .collect();
            reported.extend(chain.iter().map(|e| e.from.as_str()));
            out.push(format!("module cycle: {}", text.join("; ")));
        }
    }
    out
}

/// The shortest chain of uses from `start` back to itself (breadth first).
fn path_back<'a>(
    graph: &BTreeMap<&'a str, BTreeMap<&'a str, &'a Edge>>,
    start: &'a str,
) -> Option<Vec<&'a Edge>> {
    let mut came: BTreeMap<&str, &Edge> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        for (next, edge) in graph.get(at).into_iter().flatten() {
            if *next == start {
                let mut chain = vec![*edge];
                let mut cur = at;
                while cur != start {
                    let e = came[cur];
                    chain.push(e);
                    cur = e.from.as_str();
                }
                chain.reverse();
                return Some(chain);
            }
            if !came.contains_key(next) {
                came.insert(next, edge);
                queue.push_back(next);
            }
        }
    }
    None
}

#[test]
fn every_import_follows_the_layer_order() {
    let (_, edges) = edges();
    assert!(
        edges.len() > 100,
        "found only {} uses: the parser lost them",
        edges.len()
    );
    let wrong = against_layers(&edges);
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));
}

#[test]
fn no_module_depends_on_itself() {
    let (sources, edges) = edges();
    let found = cycles(&sources, &edges);
    assert!(found.is_empty(), "\n{}\n", found.join("\n"));
}
