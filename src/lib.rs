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

    #[test]
    fn imports_point_downwards_with_no_cycle() {
        let graph = imports();
        // Peel off modules that import nothing left; what remains is in or above a cycle.
        let mut left: BTreeSet<&String> = graph.keys().collect();
        loop {
            let leaves: Vec<&String> = left.iter().copied().filter(|m| graph[*m].keys().all(|d| !left.contains(d))).collect();
            if leaves.is_empty() {
                break;
            }
            for l in leaves {
                left.remove(l);
            }
        }
        let edges: Vec<String> = left
            .iter()
            .flat_map(|m| graph[*m].iter().filter(|(d, _)| left.contains(d)).map(move |(d, f)| format!("{m} -> {d} ({})", f.display())))
            .collect();
        assert!(left.is_empty(), "imports form a cycle among {left:?}:\n{}", edges.join("\n"));
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
