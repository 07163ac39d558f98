//! The Kubernetes manifests of `deploy/kubernetes/` (the Helm chart rendered, see
//! `deploy/render`), read as JSON values, so tests can run the image the way the
//! DaemonSet does and scrape it the way the monitor does.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let manifests = netdoctor_lab::chart::Manifests::load_default()?;
//! let ds = manifests.one("DaemonSet")?;
//! println!("{}", ds["spec"]["template"]["spec"]["hostNetwork"]);
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde_json::{Map, Number, Value};
use yaml_rust2::{Yaml, YamlLoader};

/// `deploy/kubernetes/`.
pub fn manifests_dir() -> PathBuf {
    crate::prometheus::repo_root().join("deploy/kubernetes")
}

/// Every object of a set of manifest files.
#[derive(Debug, Clone)]
pub struct Manifests {
    /// The objects, in file order.
    pub objects: Vec<Value>,
}

impl Manifests {
    /// Every `*.yaml` of [`manifests_dir`].
    pub fn load_default() -> Result<Manifests> {
        let dir = manifests_dir();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        Self::load(&files)
    }

    /// The objects of `files` (multi-document YAML).
    pub fn load(files: &[PathBuf]) -> Result<Manifests> {
        let mut objects = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            objects.extend(parse_documents(&text).with_context(|| file.display().to_string())?);
        }
        Ok(Manifests { objects })
    }

    /// The objects of kind `kind`.
    pub fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    /// The only object of kind `kind`; an error when there is none or several.
    pub fn one(&self, kind: &str) -> Result<&Value> {
        match self.of_kind(kind).as_slice() {
            [one] => Ok(one),
            other => bail!(
                "expected one {kind} in the manifests, found {}",
                other.len()
            ),
        }
    }
}

/// The non-empty documents of a YAML stream, as JSON values.
pub fn parse_documents(text: &str) -> Result<Vec<Value>> {
    let docs = YamlLoader::load_from_str(text).context("parsing YAML")?;
    docs.iter()
        .filter(|d| !matches!(d, Yaml::Null | Yaml::BadValue))
        .map(to_json)
        .collect()
}

/// A YAML value as JSON (keys must be strings, numbers or booleans).
pub fn to_json(yaml: &Yaml) -> Result<Value> {
    Ok(match yaml {
        Yaml::Null | Yaml::BadValue => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::Number((*i).into()),
        Yaml::Real(text) => {
            let f: f64 = text
                .parse()
                .with_context(|| format!("YAML number {text:?}"))?;
            Number::from_f64(f).map_or(Value::Null, Value::Number)
        }
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(items) => Value::Array(items.iter().map(to_json).collect::<Result<_>>()?),
        Yaml::Hash(hash) => {
            let mut map = Map::new();
            for (k, v) in hash {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    other => bail!("unsupported YAML key {other:?}"),
                };
                map.insert(key, to_json(v)?);
            }
            Value::Object(map)
        }
        Yaml::Alias(_) => bail!("unresolved YAML alias"),
    })
}

/// Expands Kubernetes' `$(VAR)` references in a container argument from `env`, as the
/// kubelet does (`$$` is a literal `$`; unknown variables stay as written).
pub fn expand(arg: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some((name, tail)) = after
            .strip_prefix('(')
            .and_then(|a| a.split_once(')'))
            .filter(|(name, _)| env.contains_key(*name))
        {
            out.push_str(&env[name]);
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The string at `pointer` (JSON pointer) of `value`, or an error naming it.
pub fn str_at<'a>(value: &'a Value, pointer: &str) -> Result<&'a str> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .with_context(|| format!("no string at {pointer}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_becomes_json_with_aliases_resolved() -> Result<()> {
        let docs = parse_documents(
            "---\na: &x {b: 1, c: [true, 2.5, null, \"s\"]}\nd: *x\n---\n---\nkind: X\n",
        )?;
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["d"]["c"][1], 2.5);
        assert_eq!(docs[0]["a"], docs[0]["d"]);
        assert_eq!(docs[1]["kind"], "X");
        Ok(())
    }

    #[test]
    fn arguments_expand_like_the_kubelet() {
        let env: BTreeMap<String, String> = [("POD_IP".to_owned(), "10.0.0.1".to_owned())]
            .into_iter()
            .collect();
        assert_eq!(
            expand("--listen=$(POD_IP):9469", &env),
            "--listen=10.0.0.1:9469"
        );
        assert_eq!(expand("[$(POD_IP)]", &env), "[10.0.0.1]");
        assert_eq!(expand("$$(POD_IP) $(NOPE) $", &env), "$(POD_IP) $(NOPE) $");
    }
}
