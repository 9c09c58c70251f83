//! The built-in dangerous-command rules. Each returns the short rule name.

use super::lex::{lex, SimpleCommand};
use regex::Regex;
use std::sync::LazyLock;

/// Rule names (shown in refusals).
pub(crate) const DELETE_ROOT: &str = "recursive delete of /";
pub(crate) const DELETE_HOME: &str = "recursive delete of the home directory";
pub(crate) const MKFS: &str = "mkfs";
pub(crate) const DD_DEVICE: &str = "dd onto a block device";
pub(crate) const WRITE_DEVICE: &str = "write to a block device";
pub(crate) const FORK_BOMB: &str = "fork bomb";
pub(crate) const CHMOD_ROOT: &str = "recursive chmod of /";
pub(crate) const CHOWN_ROOT: &str = "recursive chown of /";
pub(crate) const POWER: &str = "shutdown or reboot";
pub(crate) const DOWNLOAD_SHELL: &str = "download piped into a shell";

/// How deep `sh -c`, `eval` and `$(...)` bodies are followed.
const MAX_DEPTH: usize = 6;

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox",
];
const DOWNLOADERS: &[&str] = &["curl", "wget", "fetch", "aria2c"];
const POWER_COMMANDS: &[&str] = &["shutdown", "reboot", "halt", "poweroff"];

const BLOCK_DEVICE: &str = r"/dev/(?:sd[a-z]|nvme[0-9]|hd[a-z]|vd[a-z]|xvd[a-z]|mmcblk[0-9])";

fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

static BLOCK_DEVICE_RE: LazyLock<Option<Regex>> = LazyLock::new(|| re(&format!("^{BLOCK_DEVICE}")));
static REDIRECT_RE: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(&format!(r#">\|?\s*["']?{BLOCK_DEVICE}"#)));
static FORK_BOMB_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"([A-Za-z_:.][\w:.-]*)\s*\(\s*\)\s*\{\s*([\w:.-]+)\s*\|\s*([\w:.-]+)\s*&\s*;?\s*\}")
});
static SUBST_DOWNLOAD_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r#"(?:\b(?:sh|bash|zsh|dash|ksh)\b|\bsource\b|(?:^|[\s;&|])\.)\s*[^|;&]*<\(\s*(?:curl|wget)\b|\b(?:sh|bash|zsh|dash|ksh)\s+-c\s+["']?\$\(\s*(?:curl|wget)\b"#,
    )
});

fn matches(re: &LazyLock<Option<Regex>>, text: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(text))
}

/// The name of the first built-in rule `text` breaks, if any. `home` is the
/// literal home directory, also treated as `~`.
pub(crate) fn check(text: &str, home: Option<&str>) -> Option<&'static str> {
    analyze(text, home, 0)
}

fn analyze(text: &str, home: Option<&str>, depth: usize) -> Option<&'static str> {
    if depth > MAX_DEPTH {
        return None;
    }
    if is_fork_bomb(text) {
        return Some(FORK_BOMB);
    }
    if matches(&REDIRECT_RE, text) {
        return Some(WRITE_DEVICE);
    }
    if matches(&SUBST_DOWNLOAD_RE, text) {
        return Some(DOWNLOAD_SHELL);
    }
    let lexed = lex(text);
    let mut download_in_pipeline = false;
    for cmd in &lexed.commands {
        if !cmd.piped {
            download_in_pipeline = false;
        }
        let (name, args) = command_of(cmd);
        if SHELLS.contains(&name) && cmd.piped && download_in_pipeline {
            return Some(DOWNLOAD_SHELL);
        }
        if let Some(rule) = command_rule(name, args, home) {
            return Some(rule);
        }
        if let Some(script) = inner_script(name, args) {
            if let Some(rule) = analyze(&script, home, depth + 1) {
                return Some(rule);
            }
        }
        if DOWNLOADERS.contains(&name) {
            download_in_pipeline = true;
        }
    }
    lexed
        .nested
        .iter()
        .find_map(|body| analyze(body, home, depth + 1))
}

/// `f(){ f|f& };f` with the same name three times.
fn is_fork_bomb(text: &str) -> bool {
    let Some(re) = FORK_BOMB_RE.as_ref() else {
        return false;
    };
    re.captures_iter(text).any(|c| {
        let name = c.get(1).map(|m| m.as_str());
        name.is_some()
            && name == c.get(2).map(|m| m.as_str())
            && name == c.get(3).map(|m| m.as_str())
    })
}

/// The command name (basename) and its arguments, past assignments and
/// wrappers such as `sudo`, `env`, `nohup`, `timeout 10`.
fn command_of(cmd: &SimpleCommand) -> (&str, &[String]) {
    let words = cmd.words.as_slice();
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        if is_assignment(w) {
            i += 1;
            continue;
        }
        let base = basename(w);
        let takes_arg: &[&str] = match base {
            "sudo" | "doas" => &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"],
            "env" => &["-u", "-C", "-S", "--unset", "--chdir"],
            "nice" | "ionice" => &["-n", "-c"],
            "exec" => &["-a"],
            "nohup" | "time" | "command" | "builtin" | "timeout" | "setsid" | "stdbuf"
            | "xargs" => &[],
            _ => return (base, &words[i + 1..]),
        };
        i += 1;
        while i < words.len() {
            let a = words[i].as_str();
            if a == "--" {
                i += 1;
                break;
            }
            if takes_arg.contains(&a) {
                i += 2;
            } else if a.starts_with('-')
                || is_assignment(a)
                || a.starts_with(|c: char| c.is_ascii_digit())
            {
                i += 1;
            } else {
                break;
            }
        }
    }
    ("", &[])
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            let mut chars = name.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

fn basename(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

/// The script of `sh -c SCRIPT` or `eval ARGS...`.
fn inner_script(name: &str, args: &[String]) -> Option<String> {
    if name == "eval" {
        return Some(args.join(" "));
    }
    if !SHELLS.contains(&name) {
        return None;
    }
    let mut rest = args;
    if name == "busybox" {
        rest = rest.get(1..)?;
    }
    let pos = rest
        .iter()
        .position(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('c'))?;
    rest.get(pos + 1..)?
        .iter()
        .find(|a| !a.starts_with('-'))
        .cloned()
}

/// Options (before `--`) and operands of a command's arguments.
fn split_args(args: &[String]) -> (Vec<&str>, Vec<&str>) {
    let mut opts = Vec::new();
    let mut operands = Vec::new();
    let mut done = false;
    for a in args {
        if !done && a == "--" {
            done = true;
        } else if !done && a.starts_with('-') && a.len() > 1 {
            opts.push(a.as_str());
        } else {
            operands.push(a.as_str());
        }
    }
    (opts, operands)
}

/// `-r`, `-R`, `-fr`, `--recursive`; `letters` are the short flags that count.
fn has_flag(opts: &[&str], letters: &[char], long: &str) -> bool {
    opts.iter().any(|o| match o.strip_prefix("--") {
        Some(l) => l == long,
        None => o[1..].chars().any(|c| letters.contains(&c)),
    })
}

/// `/`, `//`, `/*`, `/.`: the root itself.
fn is_root(t: &str) -> bool {
    t.starts_with('/') && t.chars().all(|c| matches!(c, '/' | '.' | '*'))
}

/// `~`, `~/`, `~/*`, `$HOME`, `${HOME}/`, or the literal home directory.
fn is_home(t: &str, home: Option<&str>) -> bool {
    let home = home
        .map(|h| h.trim_end_matches('/'))
        .filter(|h| !h.is_empty());
    ["~", "$HOME", "${HOME}"]
        .into_iter()
        .chain(home)
        .any(|prefix| {
            t.strip_prefix(prefix)
                .is_some_and(|rest| rest.chars().all(|c| matches!(c, '/' | '.' | '*')))
        })
}

fn command_rule(name: &str, args: &[String], home: Option<&str>) -> Option<&'static str> {
    let (opts, operands) = split_args(args);
    match name {
        "rm" if has_flag(&opts, &['r', 'R'], "recursive") => {
            if operands.iter().any(|t| is_root(t)) {
                Some(DELETE_ROOT)
            } else if operands.iter().any(|t| is_home(t, home)) {
                Some(DELETE_HOME)
            } else {
                None
            }
        }
        "find" if args.iter().any(|a| a == "-delete" || a == "rm") => {
            let mut rule = None;
            for t in args.iter().take_while(|a| !a.starts_with('-')) {
                if is_root(t) {
                    rule = Some(DELETE_ROOT);
                } else if is_home(t, home) {
                    rule = rule.or(Some(DELETE_HOME));
                }
            }
            rule
        }
        "chmod" if has_flag(&opts, &['R'], "recursive") && operands.iter().any(|t| is_root(t)) => {
            Some(CHMOD_ROOT)
        }
        "chown" | "chgrp"
            if has_flag(&opts, &['R'], "recursive") && operands.iter().any(|t| is_root(t)) =>
        {
            Some(CHOWN_ROOT)
        }
        "mkfs" | "mke2fs" => Some(MKFS),
        n if n.starts_with("mkfs.") => Some(MKFS),
        "dd" if args.iter().any(|a| {
            a.strip_prefix("of=")
                .is_some_and(|t| matches(&BLOCK_DEVICE_RE, t))
        }) =>
        {
            Some(DD_DEVICE)
        }
        "tee" if operands.iter().any(|t| matches(&BLOCK_DEVICE_RE, t)) => Some(WRITE_DEVICE),
        n if POWER_COMMANDS.contains(&n) => Some(POWER),
        "systemctl"
            if operands.iter().any(|a| {
                matches!(*a, "poweroff" | "reboot" | "halt" | "kexec" | "soft-reboot")
            }) =>
        {
            Some(POWER)
        }
        "init" | "telinit" if operands.iter().any(|a| matches!(*a, "0" | "6")) => Some(POWER),
        _ => None,
    }
}
