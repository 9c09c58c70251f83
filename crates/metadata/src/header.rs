//! YAML metadata embedded in a script's leading comments:
//!
//! ```sh
//! #!/bin/sh
//! # ---
//! # description: Count lines
//! # ---
//! ```
//!
//! The block opens at the first leading comment line that is exactly `---`
//! after its marker (`#`, `//` or `--`) and closes at the next such line.
//! The marker and one following space are stripped from every line between.

use std::path::Path;

use crate::error::MetaError;

/// How many leading bytes of a script are examined for a header block.
pub const HEADER_LIMIT: usize = 64 * 1024;

const MARKERS: [&str; 3] = ["#", "//", "--"];

/// A header block found in a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderBlock {
    /// The YAML text with markers stripped, one line per script line.
    pub yaml: String,
    /// The 1-based script line of the block's opening `---` line; YAML line
    /// `n` is script line `open_line + n`.
    pub open_line: usize,
}

/// Looks for a header block in the leading bytes of the script at `path`.
///
/// Returns `Ok(None)` when the leading comments hold no block (including
/// binaries). A block that is opened but not closed within the examined
/// bytes, or whose lines lack the marker, is an error naming the line.
pub fn extract(bytes: &[u8], path: &Path) -> Result<Option<HeaderBlock>, MetaError> {
    let truncated = bytes.len() >= HEADER_LIMIT;
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut lines = body.split(|&b| b == b'\n').enumerate().map(|(i, l)| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        (i + 1, l)
    });
    let mut opening = None;
    for (lineno, raw) in lines.by_ref() {
        if lineno == 1 && raw.starts_with(b"#!") {
            continue;
        }
        let Ok(line) = std::str::from_utf8(raw) else {
            return Ok(None);
        };
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let Some(marker) = MARKERS.iter().find(|m| t.starts_with(**m)) else {
            return Ok(None);
        };
        if t[marker.len()..].trim() == "---" {
            opening = Some((lineno, *marker));
            break;
        }
    }
    let Some((open_line, marker)) = opening else {
        return Ok(None);
    };
    let err = |line: usize, reason: String| MetaError::Invalid {
        path: path.to_path_buf(),
        line: Some(line),
        reason,
    };
    let mut yaml = String::new();
    let mut lines = lines.peekable();
    while let Some((lineno, raw)) = lines.next() {
        // The last piece of a truncated prefix may be a cut-off line.
        let cut = truncated && lines.peek().is_none();
        let line = match std::str::from_utf8(raw) {
            Ok(line) => line,
            Err(_) if cut => break,
            Err(_) => return Err(err(lineno, "header block line is not valid UTF-8".into())),
        };
        let t = line.trim_start();
        if t.is_empty() {
            yaml.push('\n');
            continue;
        }
        let Some(rest) = t.strip_prefix(marker) else {
            if cut {
                break;
            }
            return Err(err(
                lineno,
                format!("header block line does not start with the comment marker \"{marker}\" (the block opened at line {open_line} is not closed)"),
            ));
        };
        if rest.trim() == "---" {
            return Ok(Some(HeaderBlock { yaml, open_line }));
        }
        yaml.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        yaml.push('\n');
    }
    Err(err(
        open_line,
        if truncated {
            format!("header block is not closed within the first {HEADER_LIMIT} bytes")
        } else {
            "header block is not closed by a second \"---\" comment line".to_string()
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(s: &str) -> Result<Option<HeaderBlock>, MetaError> {
        extract(s.as_bytes(), Path::new("/t/x"))
    }

    #[test]
    fn finds_hash_block() {
        let b = ex("#!/bin/sh\n# helper\n# ---\n# description: d\n# params:\n#   a: {type: string}\n#\n# ---\necho\n")
            .expect("ok")
            .expect("block");
        assert_eq!(b.open_line, 3);
        assert_eq!(b.yaml, "description: d\nparams:\n  a: {type: string}\n\n");
    }

    #[test]
    fn finds_other_markers() {
        let b = ex("// ---\n// description: js\n// ---\n")
            .expect("ok")
            .expect("block");
        assert_eq!((b.open_line, b.yaml.as_str()), (1, "description: js\n"));
        let b = ex("-- ---\n-- description: lua\n-- ---\n")
            .expect("ok")
            .expect("block");
        assert_eq!(b.yaml, "description: lua\n");
    }

    #[test]
    fn no_block_when_code_comes_first() {
        assert_eq!(
            ex("#!/bin/sh\necho hi\n# ---\n# a: b\n# ---\n").expect("ok"),
            None
        );
        assert_eq!(ex("\x7fELF\x02\x01\x01\0\0\0").expect("ok"), None);
        assert_eq!(ex("").expect("ok"), None);
    }

    #[test]
    fn block_must_close_within_the_limit() {
        let mut text = String::from("#!/bin/sh\n# ---\n");
        while text.len() < HEADER_LIMIT + 100 {
            text.push_str("# description: padding padding padding\n");
        }
        let e =
            extract(&text.as_bytes()[..HEADER_LIMIT], Path::new("/t/x")).expect_err("truncated");
        assert_eq!(
            e.to_string(),
            format!("/t/x:2: header block is not closed within the first {HEADER_LIMIT} bytes")
        );
    }

    #[test]
    fn unclosed_block_is_an_error() {
        let e = ex("#!/bin/sh\n# ---\n# description: x\n").expect_err("unclosed");
        assert!(
            e.to_string()
                .starts_with("/t/x:2: header block is not closed"),
            "{e}"
        );
        let e = ex("# ---\n# description: x\necho\n").expect_err("unmarked");
        assert!(
            e.to_string()
                .starts_with("/t/x:3: header block line does not start"),
            "{e}"
        );
    }
}
