//! `cargo xtask docs`: the manual (mdBook, `docs/`) into `target/doc-book`,
//! the man pages into `target/man` — `xdpdns(8)` and one page per
//! subcommand from the clap definition itself, `xdpdns.toml(5)` from the
//! manual's configuration reference — after checking that every relative
//! link and include in the README and the manual resolves.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::CommandFactory;
use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// The command line, compiled here from the binary's own source file.
#[allow(dead_code)]
#[path = "../../userspace/src/cli.rs"]
mod cli;

const MDBOOK_VERSION: &str = "0.5.4";

pub fn build(root: &Path) -> Result<()> {
    check_links(root)?;
    let man = root.join("target/man");
    man_pages(root, &man)?;
    mdbook()?;
    crate::process::run(
        Command::new("mdbook")
            .current_dir(root.join("docs"))
            .args(["build", "--dest-dir"])
            .arg(root.join("target/doc-book")),
    )?;
    eprintln!(
        "xtask: the manual is in target/doc-book/index.html, the man pages in {}",
        man.display()
    );
    Ok(())
}

/// mdBook at the pinned version, without its server and watcher.
fn mdbook() -> Result<()> {
    let current = Command::new("mdbook").arg("--version").output();
    if let Ok(out) = current {
        if String::from_utf8_lossy(&out.stdout).contains(MDBOOK_VERSION) {
            return Ok(());
        }
    }
    eprintln!("xtask: installing mdbook {MDBOOK_VERSION}");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    crate::process::run(Command::new(cargo).args([
        "install",
        "mdbook",
        "--version",
        MDBOOK_VERSION,
        "--locked",
        "--no-default-features",
        "--features",
        "search",
    ]))
}

/// Writes `xdpdns.8`, `xdpdns-SUBCOMMAND….8` and `xdpdns.toml.5` into `out`.
pub fn man_pages(root: &Path, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut cmd = cli::Cli::command();
    cmd.build();
    write_command_pages(&cmd, "xdpdns", out)?;
    let reference = root.join("docs/src/configuration.md");
    let text = expand_includes(&reference)?;
    let page = markdown_to_man(
        &text,
        "xdpdns.toml",
        "5",
        "configuration file of the xdpdns DNS server",
    );
    std::fs::write(out.join("xdpdns.toml.5"), page)?;
    Ok(())
}

/// One page per command, named by its path (`xdpdns-ctl-status`), as git
/// and cargo name theirs; each lists its subcommands' pages.
fn write_command_pages(cmd: &clap::Command, name: &str, out: &Path) -> Result<()> {
    let display = name.replace('-', " ");
    let page = cmd
        .clone()
        .name(name.to_string())
        .display_name(name.to_string())
        .bin_name(display);
    let mut buf = Vec::new();
    clap_mangen::Man::new(page)
        .section("8")
        .manual("xdpdns manual")
        .render(&mut buf)?;
    std::fs::write(out.join(format!("{name}.8")), buf)?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        write_command_pages(sub, &format!("{name}-{}", sub.get_name()), out)?;
    }
    Ok(())
}

/// `{{#include PATH}}` lines replaced by the file they name (relative to
/// the including file), as mdBook does.
fn expand_includes(file: &Path) -> Result<String> {
    let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
    let dir = file.parent().expect("a file has a directory");
    let mut out = String::new();
    for line in text.lines() {
        match include_target(line) {
            Some(target) => {
                let path = dir.join(target);
                let included = std::fs::read_to_string(&path)
                    .with_context(|| format!("{}: include {}", file.display(), path.display()))?;
                out.push_str(&included);
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    Ok(out)
}

fn include_target(line: &str) -> Option<&str> {
    let inner = line
        .trim()
        .strip_prefix("{{#include ")?
        .strip_suffix("}}")?;
    Some(inner.trim())
}

/// CommonMark (headings, paragraphs, lists, code blocks, pipe tables,
/// inline code and emphasis) as a man page. Tables become tagged
/// paragraphs: the first cell is the tag, the other cells follow as
/// `HEADER: value` lines, the last (the meaning) as its own line.
pub fn markdown_to_man(text: &str, name: &str, section: &str, summary: &str) -> String {
    let mut man = Man::default();
    man.raw(&format!(
        ".TH \"{}\" \"{section}\" \"\" \"xdpdns {}\" \"xdpdns manual\"\n",
        name.to_uppercase(),
        env!("CARGO_PKG_VERSION")
    ));
    man.raw(&format!(
        ".SH NAME\n{} \\- {}\n",
        escape(name),
        escape(summary)
    ));
    let mut heading: Option<HeadingLevel> = None;
    let mut in_code = false;
    let mut list_depth = 0usize;
    let mut table: Option<Table> = None;
    for event in Parser::new_ext(text, Options::ENABLE_TABLES) {
        if let Some(t) = table.as_mut() {
            match event {
                Event::End(TagEnd::Table) => {
                    man.table(table.take().expect("in a table"));
                }
                Event::End(TagEnd::TableCell) => t.end_cell(),
                Event::End(TagEnd::TableHead) | Event::End(TagEnd::TableRow) => t.end_row(),
                Event::Text(s) => t.cell.push_str(&escape(&s)),
                Event::Code(s) => t.cell.push_str(&format!("\\fB{}\\fR", escape(&s))),
                _ => {}
            }
            continue;
        }
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                heading = Some(level);
                man.line_start();
                man.raw(match level {
                    HeadingLevel::H1 => ".\\\" ",
                    HeadingLevel::H2 => ".SH \"",
                    _ => ".SS \"",
                });
            }
            Event::End(TagEnd::Heading(level)) => {
                heading = None;
                man.raw(if level == HeadingLevel::H1 {
                    "\n"
                } else {
                    "\"\n"
                });
            }
            Event::Start(Tag::Paragraph) if list_depth == 0 => {
                man.line_start();
                man.raw(".PP\n");
            }
            Event::End(TagEnd::Paragraph) => man.line_start(),
            Event::Start(Tag::CodeBlock(_)) => {
                in_code = true;
                man.line_start();
                man.raw(".PP\n.RS 4\n.nf\n");
            }
            Event::End(TagEnd::CodeBlock) => {
                in_code = false;
                man.line_start();
                man.raw(".fi\n.RE\n");
            }
            Event::Start(Tag::List(_)) => list_depth += 1,
            Event::End(TagEnd::List(_)) => {
                list_depth -= 1;
                man.line_start();
                if list_depth == 0 {
                    man.raw(".PP\n");
                }
            }
            Event::Start(Tag::Item) => {
                man.line_start();
                man.raw(&format!(".IP \\(bu {}\n", 2 * list_depth));
            }
            Event::Start(Tag::Table(_)) => table = Some(Table::default()),
            Event::Start(Tag::Emphasis) => man.raw("\\fI"),
            Event::Start(Tag::Strong) => man.raw("\\fB"),
            Event::End(TagEnd::Emphasis) | Event::End(TagEnd::Strong) => man.raw("\\fR"),
            Event::Code(s) => match heading {
                Some(_) => man.text(&s),
                None => man.raw(&format!("\\fB{}\\fR", escape(&s))),
            },
            Event::Text(s) if in_code => {
                for line in s.split_inclusive('\n') {
                    man.line_start();
                    man.raw(&format!("\\&{}", escape(line)));
                }
            }
            Event::Text(s) => match heading {
                Some(_) => man.raw(&escape(&s).replace('"', "\\(dq")),
                None => man.text(&s),
            },
            Event::SoftBreak => man.raw("\n"),
            Event::HardBreak => man.raw("\n.br\n"),
            _ => {}
        }
    }
    man.line_start();
    man.out
}

#[derive(Default)]
struct Man {
    out: String,
}

impl Man {
    fn raw(&mut self, s: &str) {
        self.out.push_str(s);
    }

    /// Text of a paragraph: escaped, and a line never starts a request.
    fn text(&mut self, s: &str) {
        let escaped = escape(s);
        if self.out.ends_with('\n') && (escaped.starts_with('.') || escaped.starts_with('\'')) {
            self.out.push_str("\\&");
        }
        self.out.push_str(&escaped);
    }

    fn line_start(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
    }

    fn table(&mut self, t: Table) {
        let Some((head, rows)) = t.rows.split_first() else {
            return;
        };
        for row in rows {
            let Some((tag, rest)) = row.split_first() else {
                continue;
            };
            self.line_start();
            // An indent narrower than any key: the values start below it.
            self.raw(&format!(".TP 4\n{tag}\n"));
            let last = rest.len().saturating_sub(1);
            for (i, cell) in rest.iter().enumerate() {
                if matches!(cell.as_str(), "" | "\\-" | "—") {
                    continue;
                }
                match (i == last, head.get(i + 1)) {
                    (false, Some(h)) => self.raw(&format!("{h}: {cell}\n.br\n")),
                    _ => self.raw(&format!("{cell}\n")),
                }
            }
        }
        self.raw(".PP\n");
    }
}

#[derive(Default)]
struct Table {
    rows: Vec<Vec<String>>,
    row: Vec<String>,
    cell: String,
}

impl Table {
    fn end_cell(&mut self) {
        self.row
            .push(std::mem::take(&mut self.cell).trim().to_string());
    }

    fn end_row(&mut self) {
        self.rows.push(std::mem::take(&mut self.row));
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\e").replace('-', "\\-")
}

/// Every relative link and image in README.md and docs/src resolves to a
/// file, every `#anchor` to a heading of its page, and every include to
/// a file. Returns the problems found, all at once.
pub fn check_links(root: &Path) -> Result<()> {
    let mut files = vec![root.join("README.md")];
    collect_markdown(&root.join("docs/src"), &mut files)?;
    let mut anchors: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)?;
        for line in text.lines() {
            if let Some(target) = include_target(line) {
                let path = file.parent().expect("dir").join(target);
                if !path.is_file() {
                    problems.push(format!(
                        "{}: include {target}: no such file",
                        file.display()
                    ));
                }
            }
        }
        for dest in links(&text) {
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match dest.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (dest.as_str(), None),
            };
            let target = match path {
                "" => file.clone(),
                p => file.parent().expect("dir").join(p),
            };
            if !target.exists() {
                problems.push(format!("{}: link {dest}: no such file", file.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if target.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let key = target.canonicalize()?;
            if !anchors.contains_key(&key) {
                anchors.insert(key.clone(), heading_ids(&std::fs::read_to_string(&target)?));
            }
            if !anchors[&key].contains(anchor) {
                problems.push(format!("{}: link {dest}: no such heading", file.display()));
            }
        }
    }
    if !problems.is_empty() {
        bail!(
            "broken links in the documentation:\n  {}",
            problems.join("\n  ")
        );
    }
    Ok(())
}

fn collect_markdown(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("{}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect_markdown(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    out.sort();
    Ok(())
}

fn links(text: &str) -> Vec<String> {
    Parser::new_ext(text, Options::ENABLE_TABLES)
        .filter_map(|e| match e {
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => Some(dest_url.to_string()),
            _ => None,
        })
        .collect()
}

/// The ids mdBook gives a page's headings: lower case, spaces as `-`,
/// only letters, digits, `-` and `_` kept; a repeated id gets `-1`, `-2`.
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut current: Option<String> = None;
    for event in Parser::new_ext(text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Heading { .. }) => current = Some(String::new()),
            Event::Text(s) | Event::Code(s) => {
                if let Some(h) = current.as_mut() {
                    h.push_str(&s);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let text = current.take().unwrap_or_default();
                let id: String = text
                    .chars()
                    .filter_map(|c| match c {
                        c if c.is_alphanumeric() || c == '_' || c == '-' => {
                            Some(c.to_lowercase().next().unwrap_or(c))
                        }
                        c if c.is_whitespace() => Some('-'),
                        _ => None,
                    })
                    .collect();
                let n = seen.entry(id.clone()).or_insert(0);
                ids.insert(match *n {
                    0 => id,
                    k => format!("{id}-{k}"),
                });
                *n += 1;
            }
            _ => {}
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_get_mdbooks_ids() {
        let ids = heading_ids("# Getting started\n## `[rrl]` keys\n## Limits\n## Limits\n");
        let want = ["getting-started", "rrl-keys", "limits", "limits-1"];
        assert_eq!(ids, want.iter().map(|s| s.to_string()).collect());
    }

    #[test]
    fn a_reference_table_becomes_tagged_paragraphs() {
        let md = "# T\n\n## [server]\n\nSome `key` text.\n\n\
                  | key | default | meaning |\n| --- | --- | --- |\n| `listen` | `[]` | where - to listen |\n\n\
                  ```toml\n.dot = 1\n```\n";
        let man = markdown_to_man(md, "x.toml", "5", "a file");
        assert!(man.starts_with(".TH \"X.TOML\" \"5\""), "{man}");
        assert!(man.contains(".SH \"[server]\"\n"), "{man}");
        assert!(
            man.contains(".TP 4\n\\fBlisten\\fR\ndefault: \\fB[]\\fR\n.br\nwhere \\- to listen\n"),
            "{man}"
        );
        assert!(
            man.contains("\\&.dot = 1"),
            "a code line never starts a request: {man}"
        );
    }

    #[test]
    fn the_cli_has_a_page_per_subcommand() {
        let dir = std::env::temp_dir().join(format!("xtask-man-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = cli::Cli::command();
        cmd.build();
        write_command_pages(&cmd, "xdpdns", &dir).unwrap();
        for page in [
            "xdpdns.8",
            "xdpdns-serve.8",
            "xdpdns-ctl.8",
            "xdpdns-ctl-status.8",
        ] {
            let text = std::fs::read_to_string(dir.join(page)).unwrap();
            assert!(
                text.starts_with(".ie \\n(.g") || text.contains(".TH"),
                "{page}"
            );
        }
        let top = std::fs::read_to_string(dir.join("xdpdns.8")).unwrap();
        assert!(top.contains("check\\-config"), "subcommands listed");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
