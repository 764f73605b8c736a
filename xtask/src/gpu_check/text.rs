//! A slice of the GPT's default corpus for the bundle, so that `train --model gpt` and
//! `generate` run on a GPU machine without the `fortunes` package.

use std::path::Path;

use tessera_nn::data::TextCorpus;

use crate::TaskResult;

/// Writes the first `max_bytes` (cut at a character boundary) of the text under `src` (a file
/// or folder, read like `train --model gpt` reads it) to `dst`; returns the bytes written.
pub fn copy_text_slice(src: &Path, dst: &Path, max_bytes: usize) -> TaskResult<usize> {
    let corpus = TextCorpus::load(src)?;
    let mut end = corpus.text.len().min(max_bytes);
    while !corpus.text.is_char_boundary(end) {
        end -= 1;
    }
    if let Some(dir) = dst.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(dst, &corpus.text[..end])
        .map_err(|e| format!("cannot write {}: {e}", dst.display()))?;
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slice_ends_on_a_character_boundary() {
        let dir = std::env::temp_dir().join(format!("tessera-text-slice-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a"), "héllo").unwrap();
        let out = dir.join("out/slice.txt");
        assert_eq!(copy_text_slice(&dir.join("a"), &out, 2).unwrap(), 1);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "h");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
