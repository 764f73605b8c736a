//! A crate outside the workspace uses the harness through path dependencies: this builds and
//! runs `conformance-example` (whose whole test is one `tessera_conformance::conformance_suite!` line) with
//! cargo, sharing this workspace's target folder so that nothing already built is rebuilt.
//!
//! The nested run uses 16 cases per property: it proves the wiring (the macro, the public API,
//! the path dependencies); `conformance_example.rs` runs the same suite at the full count.
//!
//! The docs give a vendor the lines to write: docs/BACKENDS.md section 3 (and the README's
//! "Writing a backend") quote `conformance-example`'s `[dev-dependencies]` and its test between
//! HTML comment anchors, and the fast tests below check that the quotes are exact, so the
//! build above is the build of the documented lines. They also check the counts the docs give
//! (families, trait methods) against the harness.

use std::path::{Path, PathBuf};
use std::process::Command;

use tessera_conformance::suite::contract::BACKEND_METHODS;
use tessera_conformance::suite::Family;

const BACKENDS_MD: &str = include_str!("../../../docs/BACKENDS.md");
const README_MD: &str = include_str!("../../../README.md");
const EXAMPLE_MANIFEST: &str = include_str!("../../../conformance-example/Cargo.toml");
const EXAMPLE_TEST: &str = include_str!("../../../conformance-example/tests/conformance.rs");
/// The workspace's copy of the example crate's test: the workspace's clippy lints it in place of
/// a clippy pass over the out-of-tree crate.
const WORKSPACE_EXAMPLE_TEST: &str = include_str!("conformance_example.rs");

/// The text between `<!-- name` (then `:`, a space or `-->`; the rest of that comment is free
/// text) and `<!-- /name -->`,
/// or `None` when `doc` has no such anchor.
fn anchored<'a>(doc: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<!-- {name}");
    let start = [":", " ", "-->"]
        .iter()
        .find_map(|after| doc.find(&format!("{open}{after}")))?;
    let body = &doc[start..];
    let body = &body[body.find("-->").expect("the anchor comment is closed") + 3..];
    let end = body
        .find(&format!("<!-- /{name} -->"))
        .unwrap_or_else(|| panic!("anchor `{name}` is not closed"));
    Some(&body[..end])
}

/// The lines inside the fenced code blocks of `text`, as written, less the indentation of their
/// fence (a block inside a Markdown list item is indented with it).
fn fenced_lines(text: &str) -> Vec<&str> {
    let mut fence: Option<String> = None;
    let mut lines = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            fence = match fence {
                None => Some(line[..line.len() - trimmed.len()].to_string()),
                Some(_) => None,
            };
        } else if let Some(indent) = &fence {
            lines.push(line.strip_prefix(indent.as_str()).unwrap_or(line));
        }
    }
    lines
}

/// The `[dev-dependencies]` table of a manifest: its header and entries, comments left out.
fn dev_dependencies(manifest: &str) -> Vec<&str> {
    let mut lines = manifest
        .lines()
        .skip_while(|l| l.trim() != "[dev-dependencies]");
    let header = lines.next().expect("a [dev-dependencies] table");
    let entries = lines
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    std::iter::once(header).chain(entries).collect()
}

/// The code of a Rust file: its lines without comment lines and blank lines.
fn code_lines(source: &str) -> Vec<&str> {
    source
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("//"))
        .collect()
}

/// The docs that quote the out-of-tree crate; BACKENDS.md must quote both files.
fn quoting_docs() -> [(&'static str, &'static str); 2] {
    [("docs/BACKENDS.md", BACKENDS_MD), ("README.md", README_MD)]
}

#[test]
fn the_documented_dependency_lines_are_the_example_crates() {
    let wanted = dev_dependencies(EXAMPLE_MANIFEST);
    assert!(
        wanted
            .iter()
            .any(|l| l.starts_with("tessera-conformance = ")),
        "conformance-example depends on the harness by its package name: {wanted:?}"
    );
    for (name, doc) in quoting_docs() {
        let Some(quoted) = anchored(doc, "conformance-dependencies") else {
            assert_ne!(
                name, "docs/BACKENDS.md",
                "BACKENDS.md quotes the dependencies"
            );
            continue;
        };
        assert_eq!(
            fenced_lines(quoted),
            wanted,
            "{name}: the dependency lines differ from conformance-example/Cargo.toml's"
        );
    }
}

#[test]
fn the_workspace_runs_and_lints_the_example_crates_test() {
    assert_eq!(
        code_lines(WORKSPACE_EXAMPLE_TEST),
        code_lines(EXAMPLE_TEST),
        "tests/tests/integration/conformance_example.rs differs from conformance-example/tests/conformance.rs"
    );
}

#[test]
fn the_documented_test_is_the_example_crates() {
    let wanted = code_lines(EXAMPLE_TEST);
    for (name, doc) in quoting_docs() {
        let Some(quoted) = anchored(doc, "conformance-macro") else {
            assert_ne!(name, "docs/BACKENDS.md", "BACKENDS.md quotes the macro");
            continue;
        };
        assert_eq!(
            fenced_lines(quoted),
            wanted,
            "{name}: the macro invocation differs from conformance-example/tests/conformance.rs"
        );
    }
}

#[test]
fn the_documented_families_and_methods_are_the_harness() {
    let families: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
    let listed = anchored(BACKENDS_MD, "conformance-families").expect("the family list");
    let count = format!("{} of them (", families.len());
    let list = listed
        .find(&count)
        .map(|at| &listed[at + count.len()..])
        .unwrap_or_else(|| panic!("BACKENDS.md section 3 says `{count}...)`: {listed}"));
    let list = &list[..list.find(')').expect("the list is closed")];
    let names: Vec<&str> = list.split('`').skip(1).step_by(2).collect();
    assert_eq!(
        names, families,
        "BACKENDS.md section 3 lists the families of the macro"
    );
    // The reference table of section 5 has one row per family.
    let start = BACKENDS_MD
        .find("### Families")
        .expect("section 5's families");
    let table = &BACKENDS_MD[start..];
    let table = &table[..table.find("\n### ").expect("a section after the families")];
    for family in &families {
        assert!(
            table.contains(&format!("\n| {family} | ")),
            "BACKENDS.md section 5 has no row for the family `{family}`"
        );
    }
    assert!(
        BACKENDS_MD.contains(&format!("({} today)", BACKEND_METHODS.len())),
        "BACKENDS.md section 5 gives the trait's method count, {}",
        BACKEND_METHODS.len()
    );
    // The README's "Writing a backend" gives both counts too.
    assert!(
        README_MD.contains(&format!("per op family ({})", families.len())),
        "README.md gives the family count {}",
        families.len()
    );
    assert!(
        README_MD.contains(&format!("{} today", BACKEND_METHODS.len())),
        "README.md gives the trait's method count {}",
        BACKEND_METHODS.len()
    );
}

#[test]
fn an_outside_crate_checks_a_backend_with_one_macro_line() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace root");
    let manifest = workspace.join("conformance-example").join("Cargo.toml");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        // Unoptimised: the point is that the crate builds and passes, and its own workspace
        // resolves other dependency features than this one, so little of this workspace's
        // build is reused; a whole unoptimised build takes a third of an optimised one.
        .args(["--config", "profile.test.opt-level=0"])
        .args(["--config", "profile.dev.package.\"*\".opt-level=0"])
        .arg("test")
        .arg("--manifest-path")
        .arg(&manifest)
        .args(["--test", "conformance"])
        .env("CARGO_TARGET_DIR", &target)
        .env("PROPTEST_CASES", "16")
        .output()
        .expect("cargo starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the out-of-tree suite failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    let families = tessera_conformance::suite::Family::ALL.len();
    assert!(
        stdout.contains(&format!("test result: ok. {families} passed")),
        "expected the {families} generated tests to pass\n{stdout}"
    );
}
