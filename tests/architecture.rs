//! The import graph of `userspace/src` has no cycles: not between files,
//! and not between the top-level areas (`zone`, `transfer`, `config`,
//! `handler`, `server`, `registry`, `xdp`, ...). Data flows one way; a
//! cycle is how it stops doing so. The graph is read from the source:
//! every `crate::a::b` and `super::x` path a file names is an edge to the
//! deepest module file that path reaches. Test modules (`tests.rs`, and
//! everything after `#[cfg(test)]`) are left out: a test may reach back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (e.g. `registry::health`) → its file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts.last().is_some_and(|p| p == "tests") {
                continue;
            }
            let name = parts.join("::");
            if name == "lib" || name == "main" {
                continue;
            }
            out.insert(name, path);
        }
    }
    out
}

/// The code of a file without its test module and comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Paths a file names, as `a::b::c` relative to the crate root.
fn paths_named(module: &str, code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let parent: Vec<&str> = {
        let mut p: Vec<&str> = module.split("::").collect();
        p.pop();
        p
    };
    let bytes = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent.clone())] {
        let mut at = 0;
        while let Some(i) = code[at..].find(prefix) {
            let start = at + i;
            at = start + prefix.len();
            if start > 0 && ident(bytes[start - 1]) {
                continue;
            }
            // Read `a::b::{c, d::e}` one level of braces deep.
            let mut segs: Vec<String> = base.iter().map(|s| s.to_string()).collect();
            let mut j = at;
            loop {
                let k = j;
                while j < bytes.len() && ident(bytes[j]) {
                    j += 1;
                }
                if k == j {
                    break;
                }
                let seg = &code[k..j];
                if seg == "super" {
                    segs.pop();
                } else {
                    segs.push(seg.to_string());
                }
                if code[j..].starts_with("::") {
                    j += 2;
                    if code[j..].starts_with('{') {
                        let end = code[j..].find('}').map_or(code.len(), |e| j + e);
                        for item in code[j + 1..end].split(',') {
                            let item = item.trim();
                            let mut full = segs.clone();
                            full.extend(
                                item.split("::")
                                    .map(|s| s.split_whitespace().next().unwrap_or(""))
                                    .filter(|s| !s.is_empty() && *s != "self")
                                    .map(str::to_string),
                            );
                            out.insert(full.join("::"));
                        }
                        segs.clear();
                        break;
                    }
                } else {
                    break;
                }
            }
            if !segs.is_empty() {
                out.insert(segs.join("::"));
            }
        }
    }
    out
}

/// The deepest module `path` reaches, if any.
fn resolve(path: &str, mods: &BTreeMap<String, PathBuf>) -> Option<String> {
    let segs: Vec<&str> = path.split("::").collect();
    (1..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find(|m| mods.contains_key(m))
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let mut g = BTreeMap::new();
    for (m, file) in &mods {
        let edges: BTreeSet<String> = paths_named(m, &code(file))
            .iter()
            .filter_map(|p| resolve(p, &mods))
            .filter(|t| t != m && !m.starts_with(&format!("{t}::")))
            .collect();
        g.insert(m.clone(), edges);
    }
    g
}

/// One cycle of `g`, if it has any (depth-first search).
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for next in g.get(n).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let from = path.iter().position(|p| p == next).unwrap();
                    let mut cycle = path[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(next, g, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if !state.contains_key(n.as_str()) {
            let mut path = Vec::new();
            if let Some(c) = visit(n, g, &mut state, &mut path) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_import_cycle_between_files() {
    let g = graph();
    assert!(g.len() > 20, "the source tree was not found: {g:?}");
    if let Some(cycle) = find_cycle(&g) {
        panic!("import cycle between files: {}", cycle.join(" -> "));
    }
}

#[test]
fn no_import_cycle_between_areas() {
    let top = |m: &str| m.split("::").next().unwrap().to_string();
    let mut areas: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, edges) in graph() {
        let entry = areas.entry(top(&m)).or_default();
        entry.extend(edges.iter().map(|e| top(e)).filter(|e| *e != top(&m)));
    }
    if let Some(cycle) = find_cycle(&areas) {
        panic!("import cycle between areas: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_checker_sees_a_cycle() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
    g.get_mut("c").unwrap().clear();
    assert!(find_cycle(&g).is_none());
    let named = paths_named(
        "registry::health",
        "use super::state::{Entry, Registry};\nuse crate::zone::{self, store::Change};",
    );
    assert!(named.contains("registry::state::Entry"), "{named:?}");
    assert!(named.contains("zone::store::Change"), "{named:?}");
}
