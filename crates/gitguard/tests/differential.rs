//! The config reader against the real `git config --file F --list --null
//! --no-includes`: wherever git accepts a file, the same entries (canonical
//! name, value or none) in the same order; wherever git rejects it, an error
//! on the line git names, with the entries git printed before stopping.

use proptest::prelude::*;
use std::path::Path;
use std::process::Command;
use toolsrv_gitguard::Config;

/// What git makes of a file: its entries (canonical name, value), and the
/// line of its `bad config line N` if it rejected the file.
#[derive(Debug, PartialEq, Eq)]
struct Reading {
    entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    bad_line: Option<usize>,
}

/// The name git's `git_config_parse_key` stores (what lookups use): before
/// the first dot and after the last dot lowercased.
fn canonical(name: &[u8]) -> Vec<u8> {
    let first = name.iter().position(|&c| c == b'.');
    let last = name.iter().rposition(|&c| c == b'.');
    name.iter()
        .enumerate()
        .map(|(i, &c)| match (first, last) {
            (Some(f), Some(l)) if i >= f && i <= l => c,
            _ => c.to_ascii_lowercase(),
        })
        .collect()
}

fn git(dir: &Path, bytes: &[u8]) -> Reading {
    let file = dir.join("cfg");
    std::fs::write(&file, bytes).unwrap();
    let out = Command::new("git")
        .args(["config", "--file"])
        .arg(&file)
        .args(["--list", "--null", "--no-includes"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", dir)
        .env("LC_ALL", "C")
        .output()
        .expect("git runs");
    let mut entries = Vec::new();
    for item in out.stdout.split(|&c| c == 0) {
        if item.is_empty() {
            continue;
        }
        match item.iter().position(|&c| c == b'\n') {
            Some(i) => entries.push((canonical(&item[..i]), Some(item[i + 1..].to_vec()))),
            None => entries.push((canonical(item), None)),
        }
    }
    let bad_line = if out.status.success() {
        None
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let n = err
            .split("bad config line ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok());
        assert!(n.is_some(), "git failed otherwise: {err}");
        n
    };
    Reading { entries, bad_line }
}

fn mine(bytes: &[u8]) -> Reading {
    let (config, bad_line) = match Config::parse(bytes) {
        Ok(c) => (c, None),
        Err(e) => (e.partial, Some(e.line)),
    };
    let entries = config
        .entries()
        .iter()
        .map(|e| (e.raw_name().to_vec(), e.raw_value().map(<[u8]>::to_vec)))
        .collect();
    Reading { entries, bad_line }
}

fn same(dir: &Path, bytes: &[u8]) {
    assert_eq!(
        mine(bytes),
        git(dir, bytes),
        "file {:?}",
        String::from_utf8_lossy(bytes)
    );
}

/// Crafted files, ordinary and hostile.
const CASES: &[&[u8]] = &[
    b"",
    b"\n\n",
    b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
    b"[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
    b"[Remote \"Origin\"]\n\tURL = x\n",
    b"[remote.Origin]\n\turl = x\n",
    b"[a.b.c]\nk = 1\n",
    b"[a.]\nk = 1\n",
    b"[.a]\nk = 1\n",
    b"[ \"sub\"]\nk = 1\n",
    b"[a \"\"]\nk = 1\n",
    b"[a \"x\\\"y\\\\z\\q\"]\nk = 1\n",
    b"[a   \"x\"]\nk = 1\n",
    b"[a\t\"x\"]\nk = 1\n",
    b"[a \"x\" ]\nk = 1\n",
    b"[a \"x\"\n",
    b"[a \"x\n\"]\nk = 1\n",
    b"[a \"x\\\n\"]\nk = 1\n",
    b"[a\n]\nk = 1\n",
    b"[]\nk = 1\n",
    b"[a b]\n",
    b"[a_b]\n",
    b"[a-b]\nk-1 = 2\n",
    b"[a]\n-k = 1\n",
    b"[a]\n1k = 1\n",
    b"[a]\nk_1 = 1\n",
    b"k = before any section\n",
    b"[a]\nk\n",
    b"[a]\nk \n",
    b"[a]\nk =\n",
    b"[a]\nk = \n",
    b"[a]\nk=v\n",
    b"[a]\nk\t=\tv\t\n",
    b"[a]\nk = v ; comment\n",
    b"[a]\nk = v # comment\n",
    b"[a]\nk = \"v ; not a comment\"\n",
    b"[a]\nk # comment\n",
    b"[a] k = same line\n",
    b"[a]k=v[b]\n",
    b"# comment\n; comment\n[a] # comment\nk = v\n",
    b"[a] ; comment\n",
    b"[a]\nk = \"quoted\" and \"more\"\n",
    b"[a]\nk = \"\" x\n",
    b"[a]\nk = \" \" x\n",
    b"[a]\nk = \"  lead and trail  \"\n",
    b"[a]\nk = x   \"\"   \n",
    b"[a]\nk = \"unterminated\n",
    b"[a]\nk = \"spans \\\n lines\"\n",
    b"[a]\nk = one \\\n two\n",
    b"[a]\nk = one\\\ntwo\n",
    b"[a]\nk = trailing \\\n   \n",
    b"[a]\nk = \\\n",
    b"[a]\nk = end\\",
    b"[a]\nk = end \\",
    b"[a]\nk = esc \\t \\n \\b \\\\ \\\"\n",
    b"[a]\nk = bad \\x\n",
    b"[a]\nk = bad \\ \n",
    b"[a]\nhooks\\\nPath = x\n",
    b"[co\\\nre]\n",
    b"[a]\r\nk = v\r\n",
    b"[a]\rk = v\r",
    b"[a]\nk = v\rw\n",
    b"[a]\nk\r= v\n",
    b"[a]\nk = \"v\r\"\n",
    b"\r\n\r\n[a]\r\n\tk = \"x\"\r\n",
    b"\xef\xbb\xbf[a]\nk = bom\n",
    b"\xef\xbb[a]\nk = partial bom\n",
    b"\xef[a]\n",
    b"\n\xef\xbb\xbf[a]\n",
    b"\xef\xbb\xbf\xef\xbb\xbf[a]\n",
    b"[a]\nk = \xff\xfe invalid utf-8\n",
    b"[a \"\xff\"]\nk = 1\n",
    b"[\xff]\n",
    b"[a]\n\xffk = 1\n",
    b"[a]\nk\xff = 1\n",
    b"[a]\nk = nul\0after\n",
    b"[a \"x\0y\"]\nk = 1\n",
    b"[core \"fsmonitor\0\"]\n\tx = touch /tmp/m\n",
    b"[core \"FsMonitor\0\"]\n\tx = cmd\n",
    b"[core \"x.Pager\0\"]\n\tx = cmd\n",
    b"[core \"\0\"]\n\tx = cmd\n",
    b"[a]\n\0k = 1\n",
    b"[a\0]\n",
    b"# \0 in a comment\n[a]\nk = 1 ; \0\n",
    b"[a]\nk = \x0b\x0c vertical tab and form feed \x0b\n",
    b"[a]\n\x0bk = 1\n",
    b"[a]\nk = 1\n[a]\nk = 2\n[A]\nK = 3\n",
    b"[a \"s\"]\nk = 1\n[a \"S\"]\nk = 2\n",
    b"[a]\n[b]\n[c]\nk = 1\n",
    b"[a] [b] k = 1\n",
    b"[a]\n  \t  k = indented\n",
    b"[include]\n\tpath = /etc/other\n[includeIf \"gitdir:/x/\"]\n\tpath = y\n",
    b"[alias]\n\tst = \"!f() { echo \\\"$1\\\"; }; f\"\n",
    b"[a]\nk = =\n",
    b"[a]\nk == v\n",
    b"[a]\nk = [b]\n",
    b"[a]\nk = \"\\\"\"\n",
    b"[a]\nk = ;\n",
    b"[a]\nk = \"#\"#\n",
    b"[a]\nk",
    b"[a]\nk = v",
    b"[a",
    b"[",
    b"[a \"",
    b"[a \"\\",
    b"\\",
    b"=",
    b"[a]\n=v\n",
    b"[a]\nk=\"a\"\"b\"\n",
];

#[test]
fn crafted_files_read_as_git_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    for case in CASES {
        same(dir.path(), case);
    }
}

#[test]
fn long_lines_and_many_entries() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("[a]\nk = {}\n", "x".repeat(1 << 20));
    same(dir.path(), long.as_bytes());
    let cont = format!("[a]\nk = {}\n", "y\\\n".repeat(10_000));
    same(dir.path(), cont.as_bytes());
    let sub = format!("[a \"{}\"]\nk = 1\n", "s".repeat(100_000));
    same(dir.path(), sub.as_bytes());
    let many: String = (0..5000)
        .map(|i| format!("[s{i} \"x\"]\n\tk{i} = {i}\n"))
        .collect();
    same(dir.path(), many.as_bytes());
    let blank = format!("{}[a]\nk = \"\n", "\n".repeat(50_000));
    same(dir.path(), blank.as_bytes());
}

/// Fragments that exercise every branch of git's parser.
const FRAGMENTS: &[&[u8]] = &[
    b"[",
    b"]",
    b"\"",
    b"\\",
    b"\n",
    b"\r\n",
    b"\r",
    b" ",
    b"\t",
    b"=",
    b"#",
    b";",
    b".",
    b"-",
    b"core",
    b"Core",
    b"a",
    b"B",
    b"k",
    b"1",
    b"\0",
    b"\xef\xbb\xbf",
    b"\xff",
    b"\\n",
    b"\\t",
    b"\\b",
    b"\\x",
    b"\\\"",
    b"\\\\",
    b"\\\n",
    b"\"sub\"",
    b"[core]",
    b"[remote \"o\"]\n",
    b"key = v\n",
    b"\tfsmonitor = x\n",
    b"\x0b",
    b"\xc3\xa9",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_files_read_as_git_reads_them(parts in proptest::collection::vec(0..FRAGMENTS.len(), 0..40)) {
        thread_local! {
            static DIR: tempfile::TempDir = tempfile::tempdir().unwrap();
        }
        let bytes: Vec<u8> = parts.iter().flat_map(|&i| FRAGMENTS[i].iter().copied()).collect();
        DIR.with(|d| {
            let (m, g) = (mine(&bytes), git(d.path(), &bytes));
            prop_assert_eq!(m, g, "file {:?}", String::from_utf8_lossy(&bytes));
            Ok(())
        })?;
    }

    /// Files that start like a config, so that most get past the first line.
    #[test]
    fn random_sections_read_as_git_reads_them(parts in proptest::collection::vec(0..FRAGMENTS.len(), 0..30)) {
        thread_local! {
            static DIR: tempfile::TempDir = tempfile::tempdir().unwrap();
        }
        let mut bytes = b"[core]\n\tbare = false\n\tk = ".to_vec();
        bytes.extend(parts.iter().flat_map(|&i| FRAGMENTS[i].iter().copied()));
        DIR.with(|d| {
            let (m, g) = (mine(&bytes), git(d.path(), &bytes));
            prop_assert_eq!(m, g, "file {:?}", String::from_utf8_lossy(&bytes));
            Ok(())
        })?;
    }
}
