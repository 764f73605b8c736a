//! The backend contract as the suite sees it: every method of `tessera_core::Backend`, required
//! or provided, and the rows of the coverage matrix whose property checks it directly.
//!
//! [`BACKEND_METHODS`] is checked against the trait's source at test time (the `tests` crate's
//! `contract` test parses `tensor-core/src/backend.rs` with [`trait_methods`]), and every
//! method must have at least one row ([`rows_of`]): a method added to the trait without a
//! family fails that test.

use super::op::{Family, Op};

/// Every method of `tessera_core::Backend`, in the trait's order.
pub const BACKEND_METHODS: [&str; 43] = [
    "name",
    "device",
    "supports_dtype",
    "computes_16_bit",
    "upload",
    "download",
    "full",
    "copy_strided",
    "assign",
    "cast",
    "unary",
    "binary",
    "compare",
    "where_select",
    "reduce",
    "arg_reduce",
    "matmul",
    "index_select",
    "gather",
    "scatter_add",
    "random",
    "synchronize",
    "concat",
    "softmax",
    "log_softmax",
    "logsumexp",
    "conv2d",
    "conv2d_backward_input",
    "conv2d_backward_weight",
    "max_pool2d",
    "max_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_backward",
    "layer_norm",
    "layer_norm_backward",
    "relu_backward",
    "gelu_backward",
    "matmul_bias",
    "cross_entropy",
    "cross_entropy_backward",
    "adam_update",
];

/// Every method of `tessera_core::BackendStorage`: checked on every storage the memory family's
/// primitives return (`upload`, `full`, `copy_strided`).
pub const STORAGE_METHODS: [&str; 3] = ["dtype", "len", "is_empty"];

/// The rows, over every family, whose property checks `method` directly.
pub fn rows_of(method: &str) -> Vec<Op> {
    Family::ALL
        .into_iter()
        .flat_map(Family::ops)
        .filter(|op| op.method() == Some(method))
        .collect()
}

/// The contract as a table: each method, the family of its rows and how many rows check it.
pub fn contract_table() -> String {
    let mut out = String::from("Backend method          family        rows\n");
    for method in BACKEND_METHODS {
        let rows = rows_of(method);
        let family = rows
            .first()
            .map_or("NONE".to_string(), |r| r.family().to_string());
        out.push_str(&format!("{method:23} {family:13} {}\n", rows.len()));
    }
    out
}

/// The names of the methods declared in trait `name` in the Rust `source`: every `fn` at the
/// top level of the trait's body, required or provided, in order; `None` when the trait is not
/// found. Comments, string and character literals are skipped, so a `fn` in a doc comment or a
/// default body's nested item does not count.
pub fn trait_methods(source: &str, name: &str) -> Option<Vec<String>> {
    let header = format!("trait {name}");
    let start = find_code(source, &header)?;
    let body = start + source[start..].find('{')?;
    let bytes = source.as_bytes();
    let mut methods = Vec::new();
    let mut depth = 0usize;
    let mut i = body;
    while i < bytes.len() {
        let rest = &source[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
            continue;
        }
        if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
            continue;
        }
        match bytes[i] {
            b'"' => {
                i += skip_string(rest);
                continue;
            }
            b'\'' => {
                i += skip_char(rest);
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(methods);
                }
            }
            _ => {}
        }
        if depth == 1 && rest.starts_with("fn") && is_keyword_at(bytes, i, 2) {
            let after = rest[2..].trim_start();
            let ident: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !ident.is_empty() {
                methods.push(ident);
            }
        }
        i += 1;
    }
    None
}

/// The byte position of `needle` in `source` outside comments (a plain search is enough for
/// the trait header, which never appears in a string).
fn find_code(source: &str, needle: &str) -> Option<usize> {
    source.match_indices(needle).map(|(i, _)| i).find(|&i| {
        let line_start = source[..i].rfind('\n').map_or(0, |n| n + 1);
        !source[line_start..i].contains("//") && is_keyword_at(source.as_bytes(), i, needle.len())
    })
}

/// Whether the word of `len` bytes at `i` stands alone (not part of a longer identifier).
fn is_keyword_at(bytes: &[u8], i: usize, len: usize) -> bool {
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    (i == 0 || !ident(bytes[i - 1])) && bytes.get(i + len).is_none_or(|&b| !ident(b))
}

/// The length of the string literal at the start of `rest` (escapes honoured).
fn skip_string(rest: &str) -> usize {
    let bytes = rest.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The length of a character literal at the start of `rest`, or 1 for a lifetime (`'a`).
fn skip_char(rest: &str) -> usize {
    let bytes = rest.as_bytes();
    if bytes.get(1) == Some(&b'\\') {
        return rest[2..].find('\'').map_or(1, |e| e + 3);
    }
    let mut chars = rest[1..].char_indices();
    match (chars.next(), chars.next()) {
        (Some((_, _)), Some((j, '\''))) => 1 + j + 1,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parser_finds_top_level_methods_only() {
        let source = r#"
            // trait Backend { fn not_this() }
            pub trait Other { fn other(&self); }
            /// Docs mentioning fn nothing.
            pub trait Backend: Clone + 'static {
                type Storage;
                /// `fn in_docs` is not a method.
                fn required(&self, s: &'static str) -> Result<()>;
                fn provided(&self) -> Result<()> {
                    let brace = '{';
                    let text = "fn in_a_string() { }";
                    fn helper() {}
                    /* fn in_a_block_comment */
                    Ok(())
                }
                fn generic<T: Into<u8>>(&self, t: T) where T: Copy {}
            }
            pub trait Later { fn later(&self); }
            pub trait BackendStorage { fn len(&self) -> usize; }
        "#;
        assert_eq!(
            trait_methods(source, "Backend").unwrap(),
            vec!["required", "provided", "generic"]
        );
        assert_eq!(trait_methods(source, "Missing"), None);
        assert_eq!(
            trait_methods(source, "BackendStorage").unwrap(),
            vec!["len"]
        );
    }

    #[test]
    fn every_listed_method_has_rows() {
        for method in BACKEND_METHODS {
            assert!(!rows_of(method).is_empty(), "{method} has no row");
        }
        assert!(contract_table().contains("adam_update             fused"));
    }
}
