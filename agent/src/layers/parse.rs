//! Reading `agent/src` for the layer test: files and their module paths, `use` lines
//! with their groups expanded, paths in code, `pub use` re-exports, and each use
//! resolved to the file of the module it names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One source file and its module path (`["config", "wireguard", "netlink"]`).
pub(super) struct Source {
    pub(super) file: String,
    pub(super) module: Vec<String>,
    pub(super) text: String,
}

/// A file's use of another module: where (1-based line) and the path as written.
#[derive(Debug, Clone)]
pub(super) struct Edge {
    pub(super) from: String,
    pub(super) line: usize,
    pub(super) path: String,
    pub(super) to: String,
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path a file has by its place: `a/mod.rs` is `a`, `a/b.rs` is `a::b`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" {
            parts.push(stem.to_owned());
        }
    }
    parts
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&root, &mut files);
    let mut out: Vec<Source> = files
        .iter()
        .filter(|p| !p.ends_with("main.rs"))
        .map(|p| {
            let rel = p.strip_prefix(&root).expect("under src");
            Source {
                file: format!("agent/src/{}", rel.display()),
                module: module_of(rel),
                text: std::fs::read_to_string(p)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", p.display())),
            }
        })
        .collect();
    // `#[path = "x.rs"] mod name;` gives x.rs the module `name` of the declaring file.
    let mut renamed = Vec::new();
    for s in &out {
        let lines: Vec<&str> = s.text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let Some(rest) = l.trim().strip_prefix("#[path = \"") else {
                continue;
            };
            let target = rest.split('"').next().unwrap_or_default();
            let decl = lines.get(i + 1).map_or("", |n| n.trim());
            let name = decl
                .trim_start_matches("pub ")
                .trim_start_matches("mod ")
                .trim_end_matches(';');
            let dir = Path::new(&s.file).parent().expect("a folder");
            let mut module = s.module.clone();
            module.push(name.to_owned());
            renamed.push((dir.join(target).display().to_string(), module));
        }
    }
    for (file, module) in renamed {
        if let Some(s) = out.iter_mut().find(|s| s.file == file) {
            s.module = module;
        }
    }
    out
}

/// The line without a trailing `//` comment (outside a string, roughly: rustfmt'd code
/// puts comments after the code).
fn code(line: &str) -> &str {
    let t = line.trim_start();
    if t.starts_with("//") {
        return "";
    }
    let mut in_str = false;
    let b = line.as_bytes();
    for i in 0..b.len() {
        match b[i] {
            b'"' if i == 0 || b[i - 1] != b'\\' => in_str = !in_str,
            b'/' if !in_str && b.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// `a::{b, c::{d, self}, e as f}` as `a::b`, `a::c::d`, `a::c`, `a::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.replace(" as ", "@");
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = Vec::new();
    expand_into("", &tree, &mut out);
    out
}

fn expand_into(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let join = |p: &str, s: &str| {
        if p.is_empty() {
            s.to_owned()
        } else if s == "self" || s == "*" || s.is_empty() {
            p.to_owned()
        } else {
            format!("{p}::{s}")
        }
    };
    match tree.find('{') {
        Some(open) => {
            let head = tree[..open].trim_end_matches("::");
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let base = join(prefix, head);
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand_into(&base, &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            expand_into(&base, &inner[start..], out);
        }
        None => {
            let item = tree.split('@').next().unwrap_or(tree);
            if !item.is_empty() {
                out.push(join(prefix, item));
            }
        }
    }
}

/// Inline modules (`mod tests {`) of a file: (first line, last line, name), by rustfmt's
/// layout (the closing brace at the opening line's indentation).
fn inline_modules(lines: &[&str]) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let t = t.strip_prefix("pub(crate) ").unwrap_or(t);
        let t = t.strip_prefix("pub ").unwrap_or(t);
        let Some(rest) = t.strip_prefix("mod ") else {
            continue;
        };
        let Some(name) = rest.strip_suffix(" {") else {
            continue;
        };
        let indent = &l[..l.len() - l.trim_start().len()];
        let close = format!("{indent}}}");
        let end = (i + 1..lines.len())
            .find(|j| lines[*j] == close)
            .unwrap_or(lines.len());
        out.push((i, end, name.to_owned()));
    }
    out
}

/// Every `crate::`/`super::`/`self::` path a file uses, with its line (1-based) and the
/// module path it names.
fn paths(s: &Source) -> Vec<(usize, String, Vec<String>)> {
    let lines: Vec<&str> = s.text.lines().collect();
    let inline = inline_modules(&lines);
    let module_at = |i: usize| {
        let mut m = s.module.clone();
        for (a, b, name) in &inline {
            if *a < i && i < *b {
                m.push(name.clone());
            }
        }
        m
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = code(lines[i]);
        let t = line.trim_start();
        let t = t.strip_prefix("pub(crate) ").unwrap_or(t);
        let t = t.strip_prefix("pub(super) ").unwrap_or(t);
        let t = t.strip_prefix("pub ").unwrap_or(t);
        let mut written = Vec::new();
        let first = i;
        if let Some(rest) = t.strip_prefix("use ") {
            let mut stmt = rest.to_owned();
            while !stmt.contains(';') && i + 1 < lines.len() {
                i += 1;
                stmt.push_str(code(lines[i]));
            }
            let stmt = stmt.split(';').next().unwrap_or_default();
            written.extend(expand(stmt));
        } else {
            written.extend(inline_paths(line));
        }
        let here = module_at(first);
        for p in written {
            if let Some(abs) = absolute(&p, &here) {
                out.push((first + 1, p, abs));
            }
        }
        i += 1;
    }
    out
}

/// `crate::a::b`, `super::c`, `self::d` written in a line of code.
fn inline_paths(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = line[from..].find(start) {
            let at = from + at;
            let boundary = at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_');
            let preceded = at >= 2 && &line[at - 2..at] == "::";
            let end = line[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(line.len(), |e| at + e);
            if boundary && !preceded {
                out.push(line[at..end].trim_end_matches(':').to_owned());
            }
            from = end.max(at + start.len());
        }
    }
    out
}

/// The module path `path` names from module `here`; `None` when it leaves the crate.
fn absolute(path: &str, here: &[String]) -> Option<Vec<String>> {
    let mut parts = path.split("::").peekable();
    let mut base: Vec<String> = match parts.peek().copied() {
        Some("crate") => {
            parts.next();
            Vec::new()
        }
        Some("self") => {
            parts.next();
            here.to_vec()
        }
        Some("super") => here.to_vec(),
        _ => return None,
    };
    for p in parts {
        if p == "super" {
            base.pop()?;
        } else if !p.is_empty() {
            base.push(p.to_owned());
        }
    }
    Some(base)
}

/// What a module re-exports: (module, name) → the module path the name stands for.
type Reexports = BTreeMap<(Vec<String>, String), Vec<String>>;

/// The `pub use` lines of every file (`pub use dataplane::Dataplane` in `packet/mod.rs`
/// makes `packet::Dataplane` stand for `packet::dataplane::Dataplane`).
fn reexports(sources: &[Source], files: &BTreeMap<Vec<String>, String>) -> Reexports {
    let mut out = Reexports::new();
    for s in sources {
        for line in s.text.lines() {
            let t = line.trim_start();
            let Some(rest) = ["pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .find_map(|p| t.strip_prefix(p))
            else {
                continue;
            };
            let Some(stmt) = rest.split(';').next().filter(|_| rest.contains(';')) else {
                continue;
            };
            for p in expand(stmt) {
                let target = absolute(&p, &s.module).or_else(|| {
                    let mut child = s.module.clone();
                    child.extend(p.split("::").map(str::to_owned));
                    files
                        .contains_key(&child[..=s.module.len()])
                        .then_some(child)
                });
                if let (Some(target), Some(name)) = (target, p.rsplit("::").next()) {
                    out.insert((s.module.clone(), name.to_owned()), target);
                }
            }
        }
    }
    out
}

/// The file of the longest module `module` starts with, following re-exports.
fn file_of<'a>(
    module: &[String],
    files: &'a BTreeMap<Vec<String>, String>,
    reexports: &Reexports,
) -> Option<&'a str> {
    let mut module = module.to_vec();
    for _ in 0..8 {
        let n = (0..=module.len())
            .rev()
            .find(|n| files.contains_key(&module[..*n]))?;
        let next = module
            .get(n)
            .and_then(|name| reexports.get(&(module[..n].to_vec(), name.clone())));
        match next {
            Some(target) if *target != module[..=n] => {
                let mut m = target.clone();
                m.extend_from_slice(&module[n + 1..]);
                module = m;
            }
            _ => return files.get(&module[..n]).map(String::as_str),
        }
    }
    None
}

/// Every file and every use of one file by another.
pub(super) fn edges() -> (Vec<Source>, Vec<Edge>) {
    let sources = sources();
    let files: BTreeMap<Vec<String>, String> = sources
        .iter()
        .map(|s| (s.module.clone(), s.file.clone()))
        .collect();
    let reexports = reexports(&sources, &files);
    let mut out = Vec::new();
    // This file's own examples are strings, not uses.
    for s in sources
        .iter()
        .filter(|s| s.module.first().is_none_or(|m| m != "layers"))
    {
        for (line, path, abs) in paths(s) {
            let Some(to) = file_of(&abs, &files, &reexports) else {
                continue;
            };
            if to != s.file && to != "agent/src/lib.rs" {
                out.push(Edge {
                    from: s.file.clone(),
                    line,
                    path,
                    to: to.to_owned(),
                });
            }
        }
    }
    (sources, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_inline_paths_are_read() {
        assert_eq!(
            expand("super::{a, b::{c, self}, d as e, *}"),
            ["super::a", "super::b::c", "super::b", "super::d", "super"]
        );
        assert_eq!(
            inline_paths("let x = crate::config::iface::list(super::y::z);"),
            ["crate::config::iface::list", "super::y::z"]
        );
        let here = ["facts".to_owned(), "build".to_owned()];
        assert_eq!(
            absolute("super::super::config::link", &here),
            Some(vec!["config".to_owned(), "link".to_owned()])
        );
    }
}
