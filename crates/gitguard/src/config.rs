//! A git config reader that reads a file the way git's own parser does.
//!
//! It is a port of the state machine in git's `config.c` (`git_parse_source`,
//! `get_value`, `parse_value`, `get_base_var`, `get_extended_base_var`,
//! `get_next_char`), byte for byte, so that what it reports is what the
//! human's git will see, including the odd corners an attacker would use:
//!
//! - a name and a value are C strings in git: a NUL byte in a subsection or a
//!   value ends it there. `[core "fsmonitor\0"] x = cmd` is `core.fsmonitor =
//!   cmd` to git (and runs `cmd` at the next `git status`); it is to this
//!   reader too;
//! - `\r\n` is a newline, a lone `\r` is whitespace or a value byte;
//! - git's `isspace` is space, tab, `\n` and `\r` only (not `\v`, `\f`);
//! - a backslash at the very end of the file ends the value, an unknown
//!   escape (`\x`) or an unterminated quote is an error;
//! - a UTF-8 BOM is skipped at the start, a partial one is an error.
//!
//! Entries are reported like `git config --list --no-includes` reports them:
//! every entry the parser delivers, in file order, including ones git's
//! configuration set drops later with an error message (a key without a
//! section, a subsection with a newline): a superset of what git acts on.

use std::borrow::Cow;
use std::fmt;

/// A parsed git config file: its entries in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    entries: Vec<Entry>,
}

/// One `name = value` entry, as git's parser delivers it.
///
/// The public fields are for reading and matching: `section` and `key` are
/// lowercased as git compares them, `subsection` is kept as written
/// (git compares it case-sensitively). Text that is not UTF-8 is shown with
/// U+FFFD; comparisons use the exact bytes ([`Entry::raw_name`],
/// [`Entry::raw_value`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The section, lowercased (`core`, `remote`); empty for a key before any
    /// section header or under `[ "sub"]`.
    pub section: String,
    /// The subsection (`origin` in `[remote "origin"]`, `sub` in the old
    /// `[section.sub]` form, where git lowercases it), if any.
    pub subsection: Option<String>,
    /// The variable name, lowercased (`hookspath`).
    pub key: String,
    /// The value; `None` for a bare key (`[core] bare`), which git reads as
    /// boolean true. `Some("")` for `key =`.
    pub value: Option<String>,
    /// The 1-based line the entry's name starts on.
    pub line: usize,
    name: Vec<u8>,
    raw_value: Option<Vec<u8>>,
}

/// A file git's parser rejects.
///
/// The human's git refuses to run in a repository whose config it cannot
/// parse (`fatal: bad config line N`), so such a file runs nothing as it is;
/// [`ParseError::partial`] holds the entries git had read before the bad
/// line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad config line {line}")]
pub struct ParseError {
    /// The line git names in its `bad config line N` message.
    pub line: usize,
    /// The entries before the error, as git delivered them before stopping.
    pub partial: Config,
}

impl Config {
    /// Parses config file bytes the way git does.
    pub fn parse(bytes: &[u8]) -> Result<Config, ParseError> {
        Parser::new(bytes).run()
    }

    /// The entries, in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entries whose canonical name ([`Entry::name`]) is `name`
    /// (section and key case-insensitive, subsection exact), in file order.
    pub fn get_all(&self, name: &str) -> impl Iterator<Item = &Entry> + '_ {
        let want = canonical(name.as_bytes());
        self.entries
            .iter()
            .filter(move |e| e.name == want.as_slice())
    }

    /// The value git uses for a single-valued `name`: the last one.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.get_all(name).last()
    }
}

impl Entry {
    fn from_raw(raw_name: &[u8], raw_value: Option<&[u8]>, line: usize) -> Entry {
        let name = canonical(until_nul(raw_name));
        let value = raw_value.map(|v| until_nul(v).to_vec());
        let (section, subsection, key) = split(&name);
        Entry {
            section: lossy(section),
            subsection: subsection.map(lossy),
            key: lossy(key),
            value: value.as_deref().map(lossy),
            line,
            name,
            raw_value: value,
        }
    }

    /// The canonical name as git looks it up: `section[.subsection].key`,
    /// section and key lowercased.
    pub fn name(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.name)
    }

    /// The canonical name's bytes.
    pub fn raw_name(&self) -> &[u8] {
        &self.name
    }

    /// The value's bytes, as git passes them on (up to a NUL byte).
    pub fn raw_value(&self) -> Option<&[u8]> {
        self.raw_value.as_deref()
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}={}", self.name(), v),
            None => write!(f, "{}", self.name()),
        }
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A C string's view of bytes: up to the first NUL.
fn until_nul(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// Splits a name at its first and last dot, as git's key lookup does:
/// `(section, subsection, key)`.
fn split(name: &[u8]) -> (&[u8], Option<&[u8]>, &[u8]) {
    let Some(first) = name.iter().position(|&c| c == b'.') else {
        return (&[], None, name);
    };
    let last = name.iter().rposition(|&c| c == b'.').unwrap_or(first);
    let sub = (first != last).then(|| &name[first + 1..last]);
    (&name[..first], sub, &name[last + 1..])
}

/// The name git's `git_config_parse_key` stores: the part before the first
/// dot and the part after the last dot lowercased (ASCII), the middle as is.
pub(crate) fn canonical(name: &[u8]) -> Vec<u8> {
    let first = name.iter().position(|&c| c == b'.');
    let last = name.iter().rposition(|&c| c == b'.');
    name.iter()
        .enumerate()
        .map(|(i, &c)| {
            let outer = match (first, last) {
                (Some(f), Some(l)) => i < f || i > l,
                _ => true,
            };
            if outer {
                c.to_ascii_lowercase()
            } else {
                c
            }
        })
        .collect()
}

/// git's `isspace` (`sane_ctype`): space, `\t`, `\n`, `\r`.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_alpha(c: u8) -> bool {
    c.is_ascii_alphabetic()
}

/// git's `iskeychar`.
fn is_keychar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

/// The bytes of the file with git's `get_next_char` on top: `\r\n` folds to
/// `\n`, the end of the file reads as `\n` (again and again) with `eof` set,
/// and `line` counts as git's `linenr` does.
struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
    eof: bool,
    line: usize,
    entries: Vec<Entry>,
}

/// Where git's parser gives up.
struct Bad;

const BOM: [u8; 3] = [0xef, 0xbb, 0xbf];

impl<'a> Parser<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Parser {
            bytes,
            pos: 0,
            eof: false,
            line: 1,
            entries: Vec::new(),
        }
    }

    fn fgetc(&mut self) -> Option<u8> {
        let c = self.bytes.get(self.pos).copied();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    fn next(&mut self) -> u8 {
        let mut c = self.fgetc();
        if c == Some(b'\r') {
            let d = self.fgetc();
            if d == Some(b'\n') {
                c = d;
            } else if d.is_some() {
                self.pos -= 1; // ungetc
            }
        }
        match c {
            Some(b'\n') => {
                self.line += 1;
                b'\n'
            }
            Some(c) => c,
            None => {
                self.eof = true;
                self.line += 1;
                b'\n'
            }
        }
    }

    fn run(mut self) -> Result<Config, ParseError> {
        // git refuses to parse past INT_MAX bytes (and so does this reader).
        if self.bytes.len() > i32::MAX as usize {
            return Err(ParseError {
                line: 1,
                partial: Config::default(),
            });
        }
        let mut comment = false;
        let mut var: Vec<u8> = Vec::new();
        let mut baselen = 0;
        let mut bom = Some(0usize);
        loop {
            let c = self.next();
            if let Some(i) = bom.filter(|&i| i < BOM.len()) {
                if c == BOM[i] {
                    bom = Some(i + 1);
                    continue;
                }
                if i != 0 {
                    break; // a partial BOM
                }
                bom = None;
            }
            if c == b'\n' {
                if self.eof {
                    return Ok(Config {
                        entries: self.entries,
                    });
                }
                comment = false;
                continue;
            }
            if comment || is_space(c) {
                continue;
            }
            if c == b'#' || c == b';' {
                comment = true;
                continue;
            }
            if c == b'[' {
                var.clear();
                if self.base_var(&mut var).is_err() || var.is_empty() {
                    break;
                }
                var.push(b'.');
                baselen = var.len();
                continue;
            }
            if !is_alpha(c) {
                break;
            }
            let line = self.line;
            var.truncate(baselen);
            var.push(c.to_ascii_lowercase());
            match self.value(&mut var) {
                Ok(value) => {
                    let entry = Entry::from_raw(&var, value.as_deref(), line);
                    self.entries.push(entry);
                }
                Err(Bad) => break,
            }
        }
        Err(ParseError {
            line: self.line,
            partial: Config {
                entries: self.entries,
            },
        })
    }

    /// git's `get_value`: the rest of the name, then `=` and the value, or
    /// the end of the line (a bare key).
    fn value(&mut self, name: &mut Vec<u8>) -> Result<Option<Vec<u8>>, Bad> {
        let mut c;
        loop {
            c = self.next();
            if self.eof || !is_keychar(c) {
                break;
            }
            name.push(c.to_ascii_lowercase());
        }
        while c == b' ' || c == b'\t' {
            c = self.next();
        }
        if c == b'\n' {
            return Ok(None);
        }
        if c != b'=' {
            return Err(Bad);
        }
        self.parse_value().map(Some)
    }

    /// git's `parse_value`, including its trimming of trailing whitespace
    /// (`trim_len`) exactly as it behaves.
    fn parse_value(&mut self) -> Result<Vec<u8>, Bad> {
        let mut quote = false;
        let mut comment = false;
        let mut trim_len = 0usize;
        let mut value = Vec::new();
        loop {
            let mut c = self.next();
            if c == b'\n' {
                if quote {
                    self.line -= 1;
                    return Err(Bad);
                }
                if trim_len != 0 {
                    value.truncate(trim_len);
                }
                return Ok(value);
            }
            if comment {
                continue;
            }
            if is_space(c) && !quote {
                if trim_len == 0 {
                    trim_len = value.len();
                }
                if !value.is_empty() {
                    value.push(c);
                }
                continue;
            }
            if !quote && (c == b';' || c == b'#') {
                comment = true;
                continue;
            }
            trim_len = 0;
            if c == b'\\' {
                c = self.next();
                c = match c {
                    b'\n' => continue,
                    b't' => b'\t',
                    b'b' => 0x08,
                    b'n' => b'\n',
                    b'\\' | b'"' => c,
                    _ => return Err(Bad),
                };
                value.push(c);
                continue;
            }
            if c == b'"' {
                quote = !quote;
                continue;
            }
            value.push(c);
        }
    }

    /// git's `get_base_var`: `[section]`, `[section.sub]` (lowercased) or,
    /// after whitespace, `[section "sub"]`.
    fn base_var(&mut self, name: &mut Vec<u8>) -> Result<(), Bad> {
        loop {
            let c = self.next();
            if self.eof {
                return Err(Bad);
            }
            if c == b']' {
                return Ok(());
            }
            if is_space(c) {
                return self.extended_base_var(name, c);
            }
            if !is_keychar(c) && c != b'.' {
                return Err(Bad);
            }
            name.push(c.to_ascii_lowercase());
        }
    }

    /// git's `get_extended_base_var`: `"sub"` with `\` quoting any byte
    /// but a newline, then `]` right after the closing quote.
    fn extended_base_var(&mut self, name: &mut Vec<u8>, mut c: u8) -> Result<(), Bad> {
        loop {
            if c == b'\n' {
                self.line -= 1;
                return Err(Bad);
            }
            c = self.next();
            if !is_space(c) {
                break;
            }
        }
        if c != b'"' {
            return Err(Bad);
        }
        name.push(b'.');
        loop {
            let mut c = self.next();
            if c == b'\n' {
                self.line -= 1;
                return Err(Bad);
            }
            if c == b'"' {
                break;
            }
            if c == b'\\' {
                c = self.next();
                if c == b'\n' {
                    self.line -= 1;
                    return Err(Bad);
                }
            }
            name.push(c);
        }
        if self.next() != b']' {
            return Err(Bad);
        }
        Ok(())
    }
}

/// Whether git reads `value` as a boolean in a key that takes a boolean or
/// a program (`core.fsmonitor`, `pager.<cmd>`): a subset of git's
/// `git_parse_maybe_bool`, so that nothing git would run as a program is
/// taken for a boolean. A bare key (`None`) is true.
pub fn is_boolean(value: Option<&[u8]>) -> bool {
    let Some(v) = value else { return true };
    let words: [&[u8]; 7] = [b"", b"true", b"yes", b"on", b"false", b"no", b"off"];
    if words.iter().any(|w| v.eq_ignore_ascii_case(w)) {
        return true;
    }
    // An int: git takes any (`strtoimax`, base 0, with a k/m/g unit) that
    // fits; accept only plain decimal that surely fits an int.
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    !digits.is_empty()
        && digits.len() <= 9
        && digits.iter().all(u8::is_ascii_digit)
        && (digits == b"0" || digits[0] != b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &[u8]) -> Vec<(String, Option<String>)> {
        Config::parse(text)
            .unwrap()
            .entries()
            .iter()
            .map(|e| (e.name().into_owned(), e.value.clone()))
            .collect()
    }

    fn one(text: &str) -> (String, Option<String>) {
        let l = list(text.as_bytes());
        assert_eq!(l.len(), 1, "{text:?}: {l:?}");
        l.into_iter().next().unwrap()
    }

    fn bad(text: &[u8]) -> usize {
        Config::parse(text).unwrap_err().line
    }

    #[test]
    fn sections_and_subsections() {
        let l = list(
            b"[Core]\n\tBare = false\n[remote \"Origin\"]\n\turl = x\n[Branch.Main]\nremote=o\n",
        );
        assert_eq!(
            l,
            vec![
                ("core.bare".into(), Some("false".into())),
                ("remote.Origin.url".into(), Some("x".into())),
                ("branch.main.remote".into(), Some("o".into())),
            ]
        );
        let c = Config::parse(b"[remote \"Origin\"]\n\turl = x\n").unwrap();
        let e = &c.entries()[0];
        assert_eq!(e.section, "remote");
        assert_eq!(e.subsection.as_deref(), Some("Origin"));
        assert_eq!(e.key, "url");
        assert_eq!(e.line, 2);
        assert_eq!(
            c.get("REMOTE.Origin.URL").unwrap().value.as_deref(),
            Some("x")
        );
        assert!(c.get("remote.origin.url").is_none());
    }

    #[test]
    fn values() {
        assert_eq!(one("[a]b = \"x y\" z ; c").1.unwrap(), "x y z");
        assert_eq!(
            one("[a]b = x\\ty\\n\\b\\\\\\\"").1.unwrap(),
            "x\ty\n\u{8}\\\""
        );
        assert_eq!(one("[a]b = \"#;\" # c").1.unwrap(), "#;");
        assert_eq!(one("[a]b = one \\\n two").1.unwrap(), "one  two");
        assert_eq!(one("[a]b = x \\\n  \n").1.unwrap(), "x ");
        assert_eq!(one("[a]b = \"\" x").1.unwrap(), "x");
        assert_eq!(one("[a]b = \" \" x").1.unwrap(), "  x");
        assert_eq!(one("[a]b = x\\").1.unwrap(), "x");
        assert_eq!(one("[a]b =").1.unwrap(), "");
        assert_eq!(one("[a]b"), ("a.b".into(), None));
        assert_eq!(one("[a]b\r\n"), ("a.b".into(), None));
        assert_eq!(one("[a]b = x\r\n").1.unwrap(), "x");
        assert_eq!(one("[a]b = x\ry").1.unwrap(), "x\ry");
        assert_eq!(one("\u{feff}[a]b = 1").1.unwrap(), "1");
        assert_eq!(one("[a \"s\\\"\\q\\\\\"]b=1").0, "a.s\"q\\.b");
    }

    #[test]
    fn a_key_split_across_a_continuation_is_not_joined() {
        // The continuation belongs to values only: `hooks\` + newline + `Path`
        // is a bad key character.
        assert_eq!(bad(b"[core]\nhooks\\\nPath = x\n"), 2);
    }

    #[test]
    fn nul_ends_a_name_or_a_value() {
        let l = list(b"[core \"fsmonitor\0zz\"]\n\tx = touch m\n[a]b = c\0d\n");
        assert_eq!(
            l,
            vec![
                ("core.fsmonitor".into(), Some("touch m".into())),
                ("a.b".into(), Some("c".into())),
            ]
        );
        let c = Config::parse(b"[core \"fsmonitor\0\"]\n\tx = y").unwrap();
        let e = &c.entries()[0];
        assert_eq!((e.section.as_str(), e.key.as_str()), ("core", "fsmonitor"));
        assert_eq!(e.subsection, None);
    }

    #[test]
    fn errors() {
        assert_eq!(bad(b"[a]\nb = c\n[d\n"), 3);
        assert_eq!(bad(b"[a]\nb = \"c\n"), 2);
        assert_eq!(bad(b"[a]\nb = \\x\n"), 2);
        assert_eq!(bad(b"[a]\nb # c\n"), 2);
        assert_eq!(bad(b"[]\n"), 1);
        assert_eq!(bad(b"[a \"b\" ]\n"), 1);
        assert_eq!(bad(b"[a \"b\n\"]\n"), 1);
        assert_eq!(bad(b"\xef\xbb[a]"), 1);
        assert_eq!(bad(b"[a]\n1b = c"), 2);
        assert_eq!(bad(b"[a]\nk\xc3\xa9 = c"), 2);
        let e = Config::parse(b"[core]\n\tpager = p\n[x\n").unwrap_err();
        assert_eq!(e.partial.entries()[0].name(), "core.pager");
    }

    #[test]
    fn odd_names() {
        assert_eq!(one("k = 1").0, "k");
        assert_eq!(one("[ \"s\"]k = 1").0, ".s.k");
        assert_eq!(one("[a.b.C]k = 1").0, "a.b.c.k");
    }

    #[test]
    fn booleans() {
        for v in [
            "",
            "true",
            "YES",
            "On",
            "false",
            "no",
            "off",
            "0",
            "1",
            "-7",
            "123456789",
        ] {
            assert!(is_boolean(Some(v.as_bytes())), "{v}");
        }
        for v in ["08", "1234567890", "1k", "x", "true1", " true", "0x1", "-"] {
            assert!(!is_boolean(Some(v.as_bytes())), "{v}");
        }
        assert!(is_boolean(None));
    }
}
