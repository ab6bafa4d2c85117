//! iolab: a laboratory for the Linux storage I/O stack.
//! Layers follow the data: plan → engine (with interfaces) → meters → record → report; studies
//! (one file per paper) sit above plan, analysis and report and pair each plan with its panels.
#[macro_use]
mod words;

pub mod analysis;
pub mod cancel;
pub mod cli;
pub mod device;
pub mod energy;
pub mod engine;
pub mod failure;
pub mod fleet;
pub mod host;
pub mod interfaces;
pub mod meters;
pub mod output;
pub mod plan;
pub mod record;
pub mod report;
pub mod rng;
pub mod secret;
pub mod serve;
pub mod session;
pub mod settings;
pub mod store;
pub mod studies;
pub mod verify;

#[cfg(test)]
mod layering {
    // The house's one structural rule, checked: imports point downwards. Every top-level module's
    // `crate::` paths are its imports; the graph they form must have no cycle, and nothing but the
    // command line names the command line.
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    fn rust_files(p: &Path, out: &mut Vec<PathBuf>) {
        if p.is_dir() {
            for e in std::fs::read_dir(p).unwrap().flatten() {
                rust_files(&e.path(), out);
            }
        } else if p.is_file() && p.extension().is_some_and(|x| x == "rs") {
            out.push(p.to_path_buf());
        }
    }

    /// The top-level modules each one names through `crate::`, with a file that does.
    fn imports() -> BTreeMap<String, BTreeMap<String, PathBuf>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let modules: BTreeSet<String> = std::fs::read_dir(&src)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().trim_end_matches(".rs").to_string())
            .filter(|m| m != "main" && m != "lib")
            .collect();
        let mut graph = BTreeMap::new();
        for m in &modules {
            let mut files = Vec::new();
            rust_files(&src.join(m), &mut files);
            rust_files(&src.join(format!("{m}.rs")), &mut files);
            let mut names: BTreeMap<String, PathBuf> = BTreeMap::new();
            for f in files {
                let text = std::fs::read_to_string(&f).unwrap();
                // `crate::x` and each `x` of `crate::{x, y::z}`.
                for (i, _) in text.match_indices("crate::") {
                    let rest = &text[i + 7..];
                    let targets: Vec<&str> = match rest.strip_prefix('{') {
                        Some(group) => group[..group.find('}').unwrap_or(0)].split(',').map(|s| s.trim()).collect(),
                        None => vec![rest],
                    };
                    for t in targets {
                        let name: String = t.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                        if name != *m && modules.contains(&name) {
                            names.entry(name).or_insert_with(|| f.clone());
                        }
                    }
                }
            }
            graph.insert(m.clone(), names);
        }
        graph
    }

    /// The order docs/architecture.md gives, from the bottom: its line "Order, from the bottom:".
    fn documented_order() -> Vec<String> {
        let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md")).unwrap();
        let line = doc.lines().find(|l| l.starts_with("Order, from the bottom:")).expect("docs/architecture.md gives the order");
        line.split('`').skip(1).step_by(2).map(str::to_string).collect()
    }

    #[test]
    fn imports_follow_the_documented_order() {
        let graph = imports();
        let order = documented_order();
        let modules: BTreeSet<&String> = graph.keys().collect();
        let listed: BTreeSet<&String> = order.iter().collect();
        assert_eq!(modules, listed, "docs/architecture.md's order lists exactly the top-level modules");
        let rank = |m: &str| order.iter().position(|o| o == m).unwrap();
        let mut wrong = Vec::new();
        for (m, deps) in &graph {
            for (d, f) in deps {
                if rank(d) >= rank(m) {
                    wrong.push(format!("{m} imports {d} ({}), which the order puts above it", f.display()));
                }
            }
        }
        assert!(wrong.is_empty(), "imports against docs/architecture.md's order:\n{}", wrong.join("\n"));
    }

    /// Every source file as its module path (`src/report/ctx.rs` is ["report", "ctx"], a
    /// `mod.rs` is its folder's module), with its text up to its unit tests.
    fn files() -> BTreeMap<Vec<String>, (PathBuf, String)> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut paths = Vec::new();
        rust_files(&src, &mut paths);
        let mut out = BTreeMap::new();
        for p in paths {
            let rel = p.strip_prefix(&src).unwrap().with_extension("");
            let mut module: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if module.last().is_some_and(|l| l == "mod") || module == ["lib"] || module == ["main"] {
                module.pop();
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let text = match text.find("#[cfg(test)]\nmod ") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            // Comments name modules without importing them.
            let text: String = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
            out.insert(module, (p, text));
        }
        out
    }

    /// The files a file's `crate::`, `super::` and `self::` paths name: for each path, the
    /// deepest module of it that is a file. A module's ancestors are left out (its folder's
    /// `mod.rs` is its interface) and so is the crate root.
    fn file_imports() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let files = files();
        let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect() };
        let mut graph = BTreeMap::new();
        for (module, (_, text)) in &files {
            let mut named = BTreeSet::new();
            for head in ["crate::", "super::", "self::"] {
                for (i, _) in text.match_indices(head) {
                    if text[..i].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                        continue;
                    }
                    let mut base: Vec<String> = match head {
                        "crate::" => Vec::new(),
                        "self::" => module.clone(),
                        _ => module[..module.len().saturating_sub(1)].to_vec(),
                    };
                    let mut rest = &text[i + head.len()..];
                    while let Some(r) = rest.strip_prefix("super::") {
                        base.pop();
                        rest = r;
                    }
                    // `a::b::{c, d::e}`: the path up to the brace, then each item of the group.
                    let mut prefix = base.clone();
                    loop {
                        let name = ident(rest);
                        if name.is_empty() {
                            break;
                        }
                        rest = &rest[name.len()..];
                        prefix.push(name);
                        match rest.strip_prefix("::") {
                            Some(r) => rest = r,
                            None => break,
                        }
                    }
                    let mut paths = vec![prefix.clone()];
                    if let Some(group) = rest.strip_prefix('{') {
                        let mut depth = 1;
                        let end = group
                            .char_indices()
                            .find(|&(_, c)| {
                                depth += match c {
                                    '{' => 1,
                                    '}' => -1,
                                    _ => 0,
                                };
                                depth == 0
                            })
                            .map_or(group.len(), |(j, _)| j);
                        let mut depth = 0;
                        let mut item = String::new();
                        let mut items = Vec::new();
                        for c in group[..end].chars() {
                            match c {
                                '{' => depth += 1,
                                '}' => depth -= 1,
                                ',' if depth == 0 => {
                                    items.push(std::mem::take(&mut item));
                                    continue;
                                }
                                _ => {}
                            }
                            item.push(c);
                        }
                        items.push(item);
                        paths = items
                            .iter()
                            .map(|it| {
                                let mut p = prefix.clone();
                                p.extend(it.trim().split("::").map(ident).take_while(|s| !s.is_empty()));
                                p
                            })
                            .collect();
                    }
                    for p in paths {
                        let Some(k) = (1..=p.len()).rev().find(|&k| files.contains_key(&p[..k])) else { continue };
                        let target = p[..k].to_vec();
                        if target != *module && !module.starts_with(&target) {
                            named.insert(target);
                        }
                    }
                }
            }
            graph.insert(module.clone(), named);
        }
        graph
    }

    #[test]
    fn no_file_imports_another_in_a_circle() {
        let graph = file_imports();
        let mut left: BTreeSet<&Vec<String>> = graph.keys().collect();
        loop {
            let leaves: Vec<&Vec<String>> = left.iter().copied().filter(|m| graph[*m].iter().all(|d| !left.contains(d))).collect();
            if leaves.is_empty() {
                break;
            }
            for l in leaves {
                left.remove(l);
            }
        }
        // And those no file left imports: what remains is the circles (and any path between them).
        loop {
            let roots: Vec<&Vec<String>> = left.iter().copied().filter(|m| !left.iter().any(|o| graph[*o].contains(*m))).collect();
            if roots.is_empty() {
                break;
            }
            for r in roots {
                left.remove(r);
            }
        }
        let edges: Vec<String> = left
            .iter()
            .flat_map(|m| graph[*m].iter().filter(|d| left.contains(d)).map(move |d| format!("{} -> {}", m.join("/"), d.join("/"))))
            .collect();
        assert!(left.is_empty(), "files import each other in a circle:\n{}", edges.join("\n"));
    }

    #[test]
    fn only_the_command_line_names_the_command_line() {
        for (m, deps) in imports() {
            if let Some(f) = deps.get("cli") {
                panic!("{m} imports cli ({}): the command line only parses, calls the library and prints", f.display());
            }
        }
    }
}
