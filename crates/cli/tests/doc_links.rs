//! Every relative link in README.md, ARCHITECTURE.md and docs/ resolves: the
//! file exists and, for a `#fragment` into a Markdown file, a heading there
//! has that anchor (GitHub's slugs). Links in code blocks and code spans,
//! and links with a scheme (https:, mailto:), are not checked.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The Markdown files whose links are checked.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The text outside fenced code blocks, code spans blanked.
fn prose(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut out = String::new();
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        lines.push(out);
    }
    lines
}

/// Link targets: inline `[text](target)` / `![alt](target)`, reference
/// definitions `[label]: target`, and HTML `href="..."` / `src="..."`.
fn targets(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let mut depth = 0;
        let end = after.char_indices().find(|&(_, c)| match c {
            '(' => {
                depth += 1;
                false
            }
            ')' if depth == 0 => true,
            ')' => {
                depth -= 1;
                false
            }
            _ => false,
        });
        let Some((end, _)) = end else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("").trim_matches(['<', '>']);
        found.push(target.to_string());
        rest = &after[end..];
    }
    let trimmed = line.trim_start();
    if trimmed.starts_with('[') {
        if let Some(i) = trimmed.find("]: ") {
            found.push(trimmed[i + 3..].split_whitespace().next().unwrap_or("").to_string());
        }
    }
    for attr in ["href=\"", "src=\""] {
        let mut rest = line;
        while let Some(i) = rest.find(attr) {
            let after = &rest[i + attr.len()..];
            let end = after.find('"').unwrap_or(after.len());
            found.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    found
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-`
/// and `_` dropped, spaces to `-`; repeated headings get `-1`, `-2`, ...
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim();
        let base: String = heading
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut slug = base.clone();
        let mut n = 0;
        while seen.contains(&slug) {
            n += 1;
            slug = format!("{base}-{n}");
        }
        seen.insert(slug);
    }
    seen
}

/// Each broken link in `file` as `file:line: target (why)`.
fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut broken = Vec::new();
    for (n, line) in prose(&text).iter().enumerate() {
        for target in targets(line) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() { file.to_path_buf() } else { file.parent().unwrap().join(path) };
            let at = format!("{}:{}: {target}", file.display(), n + 1);
            if !resolved.exists() {
                broken.push(format!("{at} (no such file: {})", resolved.display()));
                continue;
            }
            if let Some(fragment) = fragment {
                if resolved.extension().is_some_and(|e| e == "md") {
                    let there = std::fs::read_to_string(&resolved).unwrap();
                    if !anchors(&there).contains(fragment) {
                        broken.push(format!("{at} (no heading with anchor #{fragment})"));
                    }
                }
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_in_readme_and_docs_resolves() {
    let root = repo();
    let files = documents(&root);
    assert!(files.len() > 10, "found only {files:?}");
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_checker_finds_broken_links() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("there.md"), "# A heading, with `code`\n## Twice\n## Twice\n").unwrap();
    let doc = dir.path().join("doc.md");
    std::fs::write(
        &doc,
        "[ok](there.md) [ok](there.md#a-heading-with-code) [ok](there.md#twice-1) [ok](#top)\n\
         # Top\n\
         [web](https://example.com/missing) `[code](missing.md)`\n\
         ```\n[fenced](missing.md)\n```\n\
         [gone](missing.md) ![img](img/none.png) [bad anchor](there.md#nowhere)\n\
         [ref]: also-missing.md\n<a href=\"nope.html\">x</a>\n",
    )
    .unwrap();
    let broken = broken_links(&doc);
    let targets: Vec<&str> = broken.iter().map(|b| b.split(": ").nth(1).unwrap().split(" (").next().unwrap()).collect();
    assert_eq!(targets, ["missing.md", "img/none.png", "there.md#nowhere", "also-missing.md", "nope.html"], "{broken:#?}");
}
