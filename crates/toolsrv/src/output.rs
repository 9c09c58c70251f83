//! What the client prints: lines to stdout that end the program quietly when
//! stdout is closed (docs/cli.md, "The client": `toolsrv ps | head -1` never panics), and
//! text from the server made safe for a terminal (docs/protocol.md, "Bypass requests": `toolsrv
//! pending` never prints a control character raw).

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};

/// stdout was closed by its reader (`EPIPE`): the program ends quietly.
#[derive(Debug, thiserror::Error)]
#[error("stdout is closed")]
pub struct StdoutClosed;

/// `println!` that returns an error instead of panicking; a closed stdout is
/// [`StdoutClosed`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// Write one line to stdout (see [`outln!`]).
pub fn write_line(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(stdout_error)
}

/// Write bytes to stdout as they are, and flush.
pub fn write_raw(data: &[u8]) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(data)
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// An error writing stdout: [`StdoutClosed`] for `EPIPE`, else the error itself.
pub fn stdout_error(e: io::Error) -> anyhow::Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        anyhow::Error::new(StdoutClosed)
    } else {
        anyhow::Error::new(e).context("cannot write to stdout")
    }
}

/// Whether `e` is (or wraps) [`StdoutClosed`].
pub fn is_stdout_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<StdoutClosed>())
}

/// Characters never printed raw: C0 and C1 controls and DEL (they move the
/// cursor, clear the screen, or start escape sequences), and the Unicode
/// format characters that reorder or hide text (bidirectional overrides and
/// isolates, zero-width characters), which can make a command read
/// differently from what runs.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}')
}

/// `s` with every character of [`needs_escape`] written as an escape: `\n`,
/// `\r`, `\t`, `\e` (ESC), `\xNN` for other C0 controls and DEL, `\u{NNNN}`
/// for the rest. Other text, backslashes included, is unchanged.
pub fn for_terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if needs_escape(c) && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON text made safe for a terminal: serde_json escapes C0 controls inside
/// strings but writes DEL, C1 controls and format characters raw; these are
/// replaced by `\uNNNN` escapes, which mean the same character in JSON (they
/// can only occur inside strings).
pub fn json_for_terminal(json: &str) -> Cow<'_, str> {
    if !json.chars().any(needs_escape) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        // Whitespace between tokens (pretty printing) stays as it is.
        if needs_escape(c) && !matches!(c, '\n' | '\r' | '\t') {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(for_terminal("ls -la 'a\\b'"), "ls -la 'a\\b'");
        assert_eq!(
            for_terminal("ok\rrm -rf x\u{1b}[2K\u{7}\n\t"),
            "ok\\rrm -rf x\\e[2K\\x07\\n\\t"
        );
        assert_eq!(for_terminal("\u{9b}31m\u{7f}"), "\\u{009b}31m\\x7f");
        assert_eq!(for_terminal("a\u{202e}b\u{200b}"), "a\\u{202e}b\\u{200b}");
        assert_eq!(for_terminal("héllo wörld"), "héllo wörld");
    }

    #[test]
    fn json_keeps_its_meaning() {
        let v = serde_json::json!({"command": "a\u{9b}b\u{7f}\u{202e}\r"});
        let text = serde_json::to_string(&v).unwrap_or_default();
        let safe = json_for_terminal(&text);
        assert!(!safe.chars().any(needs_escape), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap_or_default();
        assert_eq!(back, v);
    }
}
