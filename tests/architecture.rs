//! The shape of the code, checked: no import cycle between files in any
//! crate (`core/`, `userspace/`, `common/`, `ebpf/`, `xtask/`), none
//! between the top-level areas of `core/src` and `userspace/src`, no
//! source file over 1,000 lines, and a core crate that names no socket,
//! file or clock and depends on no tokio I/O (Cargo itself keeps the core
//! from importing a shell: it cannot depend on the crate that depends on
//! it). Data flows one way; a cycle is how it stops doing so.
//!
//! The graph is read with `syn`: every `use` form (groups, renames,
//! globs, `crate::`, `super::`, `self::`, uniform paths) and every path
//! in code, resolved through re-exports to the file that defines the item
//! named. Naming a module is no edge; naming an item in it is. Test code
//! (`#[cfg(test)]` items, test-only modules) is left out: a test may
//! reach back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

type ModPath = Vec<String>;

/// What one module holds: the items it defines, its child modules, the
/// names its `use` items bind (name → path as written) and its globs.
#[derive(Default, Debug)]
struct Module {
    file: PathBuf,
    items: BTreeSet<String>,
    children: BTreeSet<String>,
    imports: BTreeMap<String, ModPath>,
    globs: Vec<ModPath>,
    /// Paths named in code (not yet resolved), and `use` targets.
    named: Vec<ModPath>,
}

/// One crate's modules, by absolute path (the root is `[]`).
struct Crate {
    modules: BTreeMap<ModPath, Module>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// The file a `#[path = "…"]` attribute names.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

impl Crate {
    fn read(root: &Path) -> Crate {
        let mut krate = Crate {
            modules: BTreeMap::new(),
        };
        let dir = root.parent().unwrap().to_path_buf();
        krate.read_file(root, &dir, Vec::new());
        krate
    }

    fn read_file(&mut self, file: &Path, dir: &Path, path: ModPath) {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        self.read_items(&ast.items, file, dir, path);
    }

    /// `dir`: where this module's child module files are.
    fn read_items(&mut self, items: &[syn::Item], file: &Path, dir: &Path, path: ModPath) {
        let mut module = Module {
            file: file.to_path_buf(),
            ..Module::default()
        };
        let mut children = Vec::new();
        for item in items {
            let attrs = match item {
                syn::Item::Const(i) => &i.attrs,
                syn::Item::Enum(i) => &i.attrs,
                syn::Item::Fn(i) => &i.attrs,
                syn::Item::Impl(i) => &i.attrs,
                syn::Item::Macro(i) => &i.attrs,
                syn::Item::Mod(i) => &i.attrs,
                syn::Item::Static(i) => &i.attrs,
                syn::Item::Struct(i) => &i.attrs,
                syn::Item::Trait(i) => &i.attrs,
                syn::Item::Type(i) => &i.attrs,
                syn::Item::Union(i) => &i.attrs,
                syn::Item::Use(i) => &i.attrs,
                _ => continue,
            };
            if is_test_only(attrs) {
                continue;
            }
            let name = match item {
                syn::Item::Const(i) => Some(&i.ident),
                syn::Item::Enum(i) => Some(&i.ident),
                syn::Item::Fn(i) => Some(&i.sig.ident),
                syn::Item::Macro(i) => i.ident.as_ref(),
                syn::Item::Static(i) => Some(&i.ident),
                syn::Item::Struct(i) => Some(&i.ident),
                syn::Item::Trait(i) => Some(&i.ident),
                syn::Item::Type(i) => Some(&i.ident),
                syn::Item::Union(i) => Some(&i.ident),
                _ => None,
            };
            if let Some(n) = name {
                module.items.insert(n.to_string());
            }
            match item {
                syn::Item::Use(u) => flatten_use(&u.tree, Vec::new(), &mut module),
                syn::Item::Mod(m) => {
                    module.children.insert(m.ident.to_string());
                    children.push(m);
                }
                other => {
                    let mut paths = Paths::default();
                    paths.visit_item(other);
                    module.named.extend(paths.0);
                }
            }
        }
        self.modules.insert(path.clone(), module);
        for m in children {
            let name = m.ident.to_string();
            let mut child = path.clone();
            child.push(name.clone());
            match &m.content {
                // Inline: same file; its own children live in DIR/NAME/.
                Some((_, items)) => self.read_items(items, file, &dir.join(&name), child),
                None if path_attr(&m.attrs).is_some() => {
                    // Relative to the directory of the declaring file.
                    let target = file.parent().unwrap().join(path_attr(&m.attrs).unwrap());
                    let d = target.parent().unwrap().to_path_buf();
                    self.read_file(&target, &d, child);
                }
                None => {
                    let flat = dir.join(format!("{name}.rs"));
                    let nested = dir.join(&name).join("mod.rs");
                    let (f, d) = match flat.exists() {
                        true => (flat, dir.join(&name)),
                        false => (nested, dir.join(&name)),
                    };
                    self.read_file(&f, &d, child);
                }
            }
        }
    }

    /// `path` as written in module `at`, made absolute (`None`: another
    /// crate's, or a name not bound here such as a local or a prelude
    /// item).
    fn absolute(&self, at: &ModPath, path: &[String]) -> Option<ModPath> {
        let first = path.first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => at.clone(),
            "super" => {
                let mut base = at.clone();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            _ => {
                let module = self.modules.get(at)?;
                if let Some(bound) = module.imports.get(first) {
                    let mut full = bound.clone();
                    full.extend(path[1..].iter().cloned());
                    return match bound.first() == Some(first) {
                        // `use other_crate::x` binds `other_crate`'s name.
                        true => None,
                        false => self.absolute(at, &full),
                    };
                }
                if module.children.contains(first) || module.items.contains(first) {
                    let mut full = at.clone();
                    full.extend(path.iter().cloned());
                    return Some(full);
                }
                // A name a glob brings in.
                for glob in &module.globs {
                    // `use other_crate::m::*` while resolving `other_crate`.
                    if glob.first() == Some(first) {
                        continue;
                    }
                    let Some(from) = self.absolute(at, glob) else {
                        continue;
                    };
                    let Some(m) = self.modules.get(&from) else {
                        continue;
                    };
                    if m.items.contains(first)
                        || m.children.contains(first)
                        || m.imports.contains_key(first)
                    {
                        let mut full = from;
                        full.extend(path.iter().cloned());
                        return Some(full);
                    }
                }
                return None;
            }
        };
        base.extend(path[1..].iter().cloned());
        Some(base)
    }

    /// The file defining what absolute `path` names, through re-exports;
    /// `None` when it names a module (or nothing this crate has).
    fn defining_file(&self, path: &[String], depth: usize) -> Option<&Path> {
        if depth > 16 {
            return None;
        }
        let mut at: ModPath = Vec::new();
        for (i, seg) in path.iter().enumerate() {
            let module = self.modules.get(&at)?;
            if module.children.contains(seg) {
                at.push(seg.clone());
                continue;
            }
            if module.items.contains(seg) {
                return Some(&module.file);
            }
            let rest = &path[i + 1..];
            if let Some(target) = module.imports.get(seg) {
                let mut full = self.absolute(&at, target)?;
                full.extend(rest.iter().cloned());
                return self.defining_file(&full, depth + 1);
            }
            let mut external_glob = false;
            for glob in &module.globs {
                let Some(mut full) = self.absolute(&at, glob) else {
                    external_glob = true;
                    continue;
                };
                full.extend(path[i..].iter().cloned());
                if let Some(f) = self.defining_file(&full, depth + 1) {
                    return Some(f);
                }
            }
            // Brought in by `use other_crate::m::*` (a shell area over its
            // core half): not this crate's.
            if external_glob {
                return None;
            }
            // An enum variant, an associated item, a derive: the module's.
            return Some(&module.file);
        }
        None
    }

    /// File → the files it depends on.
    fn file_graph(&self, root: &Path) -> BTreeMap<String, BTreeSet<String>> {
        let name = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (at, module) in &self.modules {
            let from = name(&module.file);
            let edges = g.entry(from.clone()).or_default();
            let named = module
                .named
                .iter()
                .chain(module.imports.values())
                .filter_map(|p| self.absolute(at, p));
            for path in named {
                if let Some(to) = self.defining_file(&path, 0) {
                    let to = name(to);
                    if to != from {
                        edges.insert(to);
                    }
                }
            }
        }
        g
    }
}

/// Binds each leaf of a `use` tree (prefix: the path so far, absolute
/// once resolved by `Crate::absolute` at its first segment).
fn flatten_use(tree: &syn::UseTree, prefix: Vec<String>, module: &mut Module) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten_use(&p.tree, next, module);
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut full = prefix;
            // `use a::b::{self}` binds `b`.
            let bound = match name.as_str() {
                "self" => full.last().cloned().unwrap_or_default(),
                _ => {
                    full.push(name.clone());
                    name
                }
            };
            module.imports.insert(bound, full);
        }
        syn::UseTree::Rename(r) => {
            let mut full = prefix;
            if r.ident != "self" {
                full.push(r.ident.to_string());
            }
            module.imports.insert(r.rename.to_string(), full);
        }
        syn::UseTree::Glob(_) => module.globs.push(prefix),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix.clone(), module);
            }
        }
    }
}

/// Every path named in an item's code, outside test-only parts.
#[derive(Default)]
struct Paths(Vec<ModPath>);

impl<'ast> Visit<'ast> for Paths {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.0
            .push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}

/// Every cycle of `g`: its strongly connected components of more than
/// one node (Tarjan), each as a sorted list.
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        g: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, (usize, usize)>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, n: &'g str) {
            self.index.insert(n, (self.next, self.next));
            self.next += 1;
            self.stack.push(n);
            self.on_stack.insert(n);
            for m in self.g.get(n).into_iter().flatten() {
                let m = m.as_str();
                if !self.index.contains_key(m) {
                    self.visit(m);
                    let low = self.index[m].1.min(self.index[n].1);
                    self.index.get_mut(n).unwrap().1 = low;
                } else if self.on_stack.contains(m) {
                    let low = self.index[m].0.min(self.index[n].1);
                    self.index.get_mut(n).unwrap().1 = low;
                }
            }
            if self.index[n].0 == self.index[n].1 {
                let mut scc = Vec::new();
                while let Some(m) = self.stack.pop() {
                    self.on_stack.remove(m);
                    scc.push(m.to_string());
                    if m == n {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        g,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for n in g.keys() {
        if !t.index.contains_key(n.as_str()) {
            t.visit(n);
        }
    }
    t.out
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every crate root the repository builds.
const ROOTS: [&str; 6] = [
    "core/src/lib.rs",
    "userspace/src/lib.rs",
    "userspace/src/main.rs",
    "common/src/lib.rs",
    "ebpf/src/main.rs",
    "xtask/src/main.rs",
];

fn describe(found: &[Vec<String>]) -> String {
    found
        .iter()
        .map(|c| c.join(" <-> "))
        .collect::<Vec<_>>()
        .join("\n  ")
}

#[test]
fn no_import_cycle_between_files() {
    let root = repo();
    let mut problems = Vec::new();
    for crate_root in ROOTS {
        let krate = Crate::read(&root.join(crate_root));
        let g = krate.file_graph(&root);
        assert!(!g.is_empty(), "{crate_root}: no source read");
        let found = cycles(&g);
        if !found.is_empty() {
            problems.push(format!("{crate_root}:\n  {}", describe(&found)));
        }
    }
    assert!(
        problems.is_empty(),
        "import cycles between files:\n{}",
        problems.join("\n")
    );
}

#[test]
fn no_import_cycle_between_areas() {
    for src in ["core/src", "userspace/src"] {
        no_area_cycle_in(src);
    }
}

fn no_area_cycle_in(src: &str) {
    let root = repo();
    let krate = Crate::read(&root.join(src).join("lib.rs"));
    let files = krate.file_graph(&root.join(src));
    assert!(files.len() > 20, "the source tree was not read: {files:?}");
    // `zone/store.rs` and `zone.rs` are area `zone`; `lib.rs` none.
    let area = |f: &str| -> Option<String> {
        let first = f.split('/').next()?;
        (f != "lib.rs").then(|| first.trim_end_matches(".rs").to_string())
    };
    let mut areas: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, edges) in &files {
        let Some(a) = area(from) else { continue };
        let entry = areas.entry(a.clone()).or_default();
        entry.extend(edges.iter().filter_map(|e| area(e)).filter(|e| *e != a));
    }
    let found = cycles(&areas);
    assert!(
        found.is_empty(),
        "{src}: import cycles between areas:\n  {}",
        describe(&found)
    );
}

#[test]
fn no_source_file_is_over_a_thousand_lines() {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, usize)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                out.push((path, lines));
            }
        }
    }
    let root = repo();
    let mut files = Vec::new();
    for dir in [
        "core/src",
        "userspace/src",
        "common/src",
        "ebpf/src",
        "xtask/src",
    ] {
        walk(&root.join(dir), &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .filter(|(_, n)| *n > 1000)
        .map(|(p, n)| format!("{} ({n} lines)", p.strip_prefix(&root).unwrap().display()))
        .collect();
    assert!(
        long.is_empty(),
        "split these files:\n  {}",
        long.join("\n  ")
    );
}

/// The checker itself, on a crate planted with the import forms a
/// cycle can hide behind: groups, `super::{…}`, a re-export in a parent
/// `mod.rs`, a rename, a glob, and a path used only in code.
#[test]
fn the_checker_sees_every_planted_cycle() {
    let dir = std::env::temp_dir().join(format!("xdpdns-arch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let write = |rel: &str, text: &str| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let graph = || {
        let krate = Crate::read(&dir.join("lib.rs"));
        cycles(&krate.file_graph(&dir))
    };
    write("lib.rs", "mod a;\nmod b;\nmod area;\n");
    write("a.rs", "use crate::{b::B, area};\npub struct A;\n");
    write(
        "b.rs",
        "pub struct B;\nfn f() { let _ = crate::area::Reexported; }\n",
    );
    // The parent re-exports its child; the child uses the parent's item.
    write(
        "area/mod.rs",
        "mod child;\npub use child::Reexported;\npub struct Parent;\n",
    );
    write(
        "area/child.rs",
        "use super::{Parent as P};\npub struct Reexported;\nfn g(_: P) {}\n",
    );
    assert_eq!(
        graph(),
        [vec!["area/child.rs".to_string(), "area/mod.rs".to_string()]],
        "a cycle through a parent mod.rs"
    );
    // Naming a module is no edge: without the parent's item, no cycle;
    // b → area::Reexported resolves to the child's file through the
    // re-export, not to mod.rs.
    write("area/child.rs", "pub struct Reexported;\n");
    assert!(graph().is_empty(), "{:?}", graph());
    // A cycle through a group import, a glob and a path in code.
    write(
        "b.rs",
        "use crate::a::*;\npub struct B;\nfn f() { let _ = A; }\n",
    );
    assert_eq!(graph(), [vec!["a.rs".to_string(), "b.rs".to_string()]]);
    write("b.rs", "pub struct B;\nfn f() { let _ = crate::a::A; }\n");
    assert_eq!(graph(), [vec!["a.rs".to_string(), "b.rs".to_string()]]);
    // Test code may reach back.
    write(
        "b.rs",
        "pub struct B;\n#[cfg(test)]\nmod tests { use crate::a::A; }\n",
    );
    assert!(graph().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What the core crate may not name: sockets, files, clocks, processes,
/// the environment, detached threads and sleeps, and tokio beyond its
/// channels. Time and randomness that matter come in as arguments; scoped
/// threads that split a computation (the compiler's) are allowed.
const IMPURE: [&str; 23] = [
    "std::net::UdpSocket",
    "std::net::TcpStream",
    "std::net::TcpListener",
    "std::os::unix::net",
    "std::os::fd",
    "std::fs",
    "std::process",
    "std::env",
    "std::thread::spawn",
    "std::thread::sleep",
    "std::time::SystemTime::now",
    "std::time::Instant::now",
    "std::io::stdin",
    "tokio::net",
    "tokio::fs",
    "tokio::time",
    "tokio::task",
    "tokio::spawn",
    "tokio::runtime",
    "tokio::signal",
    "libc",
    "socket2",
    "memmap2",
];

/// Every path module code names, spelled out through the module's own
/// `use` items (`Instant::now` with `use std::time::Instant` is
/// `std::time::Instant::now`), outside test code.
fn spelled_paths(krate: &Crate) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for module in krate.modules.values() {
        let named = module
            .named
            .iter()
            .chain(module.imports.values())
            .chain(&module.globs);
        for path in named {
            let mut full = match path.first().and_then(|f| module.imports.get(f)) {
                Some(bound) if bound.first() != path.first() => bound.clone(),
                _ => vec![path[0].clone()],
            };
            full.extend(path.iter().skip(1).cloned());
            out.push((module.file.clone(), full.join("::")));
        }
    }
    out
}

fn impure_paths(krate: &Crate) -> Vec<String> {
    let mut found: Vec<String> = spelled_paths(krate)
        .into_iter()
        .filter(|(_, p)| {
            IMPURE
                .iter()
                .any(|bad| p == bad || p.starts_with(&format!("{bad}::")))
        })
        .map(|(f, p)| format!("{}: {p}", f.display()))
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn the_core_crate_names_no_socket_file_or_clock() {
    let krate = Crate::read(&repo().join("core/src/lib.rs"));
    assert!(krate.modules.len() > 40, "the core was not read");
    let found = impure_paths(&krate);
    assert!(
        found.is_empty(),
        "the core crate reaches the outside world:\n  {}",
        found.join("\n  ")
    );
}

/// The purity check itself, on planted code: a socket, a clock read
/// through an import, a file read in a path, and the same in test code
/// (allowed).
#[test]
fn the_purity_check_sees_planted_io() {
    let dir = std::env::temp_dir().join(format!("xdpdns-pure-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("lib.rs", "mod a;\nmod b;\n");
    write(
        "a.rs",
        "use std::net::{IpAddr, UdpSocket};\nuse std::time::Instant;\n\
         fn f(_: IpAddr) { let _ = Instant::now(); }\n",
    );
    write(
        "b.rs",
        "fn g() { let _ = std::fs::read(\"x\"); }\n\
         #[cfg(test)]\nmod tests { fn t() { let _ = std::env::args(); } }\n",
    );
    let found = impure_paths(&Crate::read(&dir.join("lib.rs")));
    let _ = std::fs::remove_dir_all(&dir);
    let names: Vec<&str> = found
        .iter()
        .map(|f| f.split(": ").nth(1).unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "std::net::UdpSocket",
            "std::time::Instant::now",
            "std::fs::read"
        ],
        "{found:?}"
    );
}

/// The core crate's dependencies, as Cargo resolves them for it alone:
/// tokio with its channels only, and nothing that does I/O.
#[test]
fn the_core_crate_depends_on_no_tokio_io() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(repo())
        .args(["tree", "--offline", "--locked", "-p", "xdpdns-core"])
        .args(["-e", "normal,features", "--prefix", "none"])
        .output()
        .expect("cargo tree runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("tokio feature \"sync\""), "{text}");
    let tokio: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("tokio feature \""))
        .filter_map(|l| l.split('"').next())
        .collect();
    assert_eq!(tokio, BTreeSet::from(["sync"]), "tokio features");
    let io_crates = [
        "mio ",
        "socket2 ",
        "hyper ",
        "axum ",
        "aya ",
        "etcd-client ",
        "memmap2 ",
    ];
    for line in text.lines() {
        assert!(
            !io_crates.iter().any(|c| line.starts_with(c)),
            "the core depends on {line}"
        );
    }
}
