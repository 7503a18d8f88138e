//! The documentation holds together: the README links every page of `docs/`, and every relative link of the
//! README, ARCHITECTURE.md and `docs/*.md` points at a file that exists (and, with a `#fragment`, at a heading
//! of that file, as GitHub names headings). No foe binary needed.

use foe_e2e::repo_root;
use regex::Regex;
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The markdown pages of `docs/`, as paths relative to the repository root (`docs/cli.md`).
fn doc_pages() -> Vec<String> {
    let mut pages: Vec<String> = fs::read_dir(repo_root().join("docs"))
        .expect("docs/ exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    pages
}

/// The pages whose links are checked, relative to the repository root.
fn checked_pages() -> Vec<String> {
    let mut pages = vec![
        "README.md".to_string(),
        "ARCHITECTURE.md".to_string(),
        "editors/vscode/README.md".to_string(),
    ];
    pages.extend(doc_pages());
    pages
}

/// The text outside fenced code blocks and inline code spans (a transcript or a code span is not a link).
fn prose(markdown: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    Regex::new(r"`[^`\n]*`")
        .unwrap()
        .replace_all(&out, "")
        .into_owned()
}

/// The targets of the inline links and images of a page: `[text](target)`, `![alt](target "title")`.
fn link_targets(markdown: &str) -> Vec<String> {
    let link = Regex::new(r#"\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)"#).unwrap();
    link.captures_iter(&prose(markdown))
        .map(|c| c[1].to_string())
        .collect()
}

/// GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, spaces, `-` and `_` kept),
/// spaces made hyphens; repeated headings get `-1`, `-2`, ...
fn anchors(markdown: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let text = line.trim_start_matches('#');
        if !text.starts_with(' ') {
            continue;
        }
        let slug: String = text
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 0;
        while seen.contains(&unique) {
            n += 1;
            unique = format!("{slug}-{n}");
        }
        seen.insert(unique);
    }
    seen
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

/// A link target resolved against the page that holds it: the file (relative to the repository root, `None` for
/// a link within the page) and the fragment.
fn resolve(page: &str, target: &str) -> (Option<PathBuf>, Option<String>) {
    let (path, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f.to_string())),
        None => (target, None),
    };
    if path.is_empty() {
        return (None, fragment);
    }
    let dir = Path::new(page).parent().unwrap_or(Path::new(""));
    let mut resolved = PathBuf::new();
    for part in dir.join(path).components() {
        match part {
            std::path::Component::ParentDir => {
                resolved.pop();
            }
            std::path::Component::CurDir => {}
            other => resolved.push(other),
        }
    }
    (Some(resolved), fragment)
}

#[test]
fn the_readme_links_every_doc_page() {
    let readme = fs::read_to_string(repo_root().join("README.md")).unwrap();
    let linked: HashSet<PathBuf> = link_targets(&readme)
        .iter()
        .filter(|t| !is_external(t))
        .filter_map(|t| resolve("README.md", t).0)
        .collect();
    let pages = doc_pages();
    assert!(
        pages.len() >= 5,
        "docs/ holds fewer pages than expected: {pages:?}"
    );
    let unlinked: Vec<&String> = pages
        .iter()
        .filter(|p| !linked.contains(Path::new(p.as_str())))
        .collect();
    assert!(
        unlinked.is_empty(),
        "README.md links no page of {unlinked:?}: add it to the README's quick links"
    );
}

#[test]
fn every_relative_link_points_at_a_file_and_heading_that_exist() {
    let root = repo_root();
    let mut problems = vec![];
    let mut checked = 0;
    for page in checked_pages() {
        let text = fs::read_to_string(root.join(&page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        for target in link_targets(&text) {
            if is_external(&target) {
                continue;
            }
            checked += 1;
            let (file, fragment) = resolve(&page, &target);
            let file = file.unwrap_or_else(|| PathBuf::from(&page));
            let full = root.join(&file);
            if !full.exists() {
                problems.push(format!(
                    "{page}: `{target}`: {} does not exist",
                    file.display()
                ));
                continue;
            }
            let Some(fragment) = fragment else {
                continue;
            };
            if file.extension().is_some_and(|e| e == "md") {
                let headings = anchors(&fs::read_to_string(&full).unwrap());
                if !headings.contains(&fragment) {
                    problems.push(format!(
                        "{page}: `{target}`: {} has no heading `#{fragment}`",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} relative links found: is the link pattern broken?"
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_anchor_and_link_readers_work() {
    let page = "# Top\n## Projects and CI: `foe check -p`\n## Top\n```\n# not a heading\n[x](nowhere.md)\n```\n\
                [a](docs/cli.md#top) ![b](img.png \"t\") `[c](code.md)` [d](https://example.org)\n";
    let found = anchors(page);
    for a in ["top", "projects-and-ci-foe-check--p", "top-1"] {
        assert!(found.contains(a), "{a} missing from {found:?}");
    }
    assert!(!found.contains("not-a-heading"));
    assert_eq!(
        link_targets(page),
        ["docs/cli.md#top", "img.png", "https://example.org"]
    );
    assert_eq!(
        resolve("docs/cli.md", "../README.md#settings"),
        (
            Some(PathBuf::from("README.md")),
            Some("settings".to_string())
        )
    );
    assert_eq!(resolve("docs/cli.md", "#x"), (None, Some("x".to_string())));
}
