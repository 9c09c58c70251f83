//! What a writable `$HOME` keeps (the server's `--cwd` is the home, or a
//! rule grants it): nothing a tool writes there may make a program the human
//! runs afterwards execute the tool's code or take its configuration. Every
//! existing entry at the home's top level whose name starts with a dot is
//! read-only, and so are `~/bin` and the directories of the server's `PATH`
//! that lie under a dot entry, unless a rule names them; ordinary files and
//! directories stay writable. Beyond the top level, [`RUN_LATER`] lists
//! what the human's shell, git, desktop session, editors and toolchains
//! execute or read, so that a rule naming a whole dot directory
//! (`rw: [~/.config]`) does not hand out `~/.config/git` or
//! `~/.config/autostart`. A missing one is watched: a tool's creation is
//! moved to quarantine.

use std::path::{Path, PathBuf};

use super::plan::RulePaths;
use crate::policy::PathContext;

/// Paths under `$HOME` that some program the human runs later executes or
/// takes its configuration from (beyond the shell start-up files, which are
/// protected whether `$HOME` is writable or not).
pub(crate) const RUN_LATER: &[&str] = &[
    // git
    "~/.gitconfig",
    "~/.config/git",
    // shells
    "~/.bash_aliases",
    "~/.bash_logout",
    "~/.inputrc",
    "~/.config/fish",
    "~/.config/environment.d",
    "~/.pam_environment",
    // programs found first on PATH
    "~/bin",
    "~/.local/bin",
    // the desktop session and the user's service manager
    "~/.config/systemd",
    "~/.config/autostart",
    "~/.xprofile",
    "~/.xinitrc",
    "~/.xsession",
    "~/.xsessionrc",
    "~/.Xresources",
    // editors
    "~/.vimrc",
    "~/.vim",
    "~/.config/nvim",
    "~/.emacs",
    "~/.emacs.d",
    "~/.config/emacs",
    "~/.nanorc",
    "~/.config/Code/User",
    // toolchains
    "~/.cargo/config.toml",
    "~/.cargo/config",
    "~/.config/pip",
    "~/.pip",
    "~/.pydistutils.cfg",
    "~/.condarc",
    "~/.npmrc",
    "~/.yarnrc",
    "~/.yarnrc.yml",
    "~/.config/go",
    "~/.m2/settings.xml",
    "~/.gradle/init.d",
    "~/.gradle/gradle.properties",
    "~/.gdbinit",
    "~/.config/gdb",
    "~/.pythonstartup",
    "~/.python_history",
    "~/.tmux.conf",
    "~/.screenrc",
    "~/.curlrc",
    "~/.wgetrc",
    "~/.config/containers",
];

/// The read-only entries of a writable home, when `home` lies in a writable
/// rule of `rules` (else none): each existing top-level dot entry, the
/// [`RUN_LATER`] paths (existing or not), and each directory of `path` (the
/// server's `PATH`) that lies under a dot entry of `home`.
pub(crate) fn read_only_entries(
    home: &Path,
    rules: &RulePaths,
    ctx: &PathContext,
    path: Option<&str>,
) -> Vec<PathBuf> {
    if !rules.writable.iter().any(|w| home.starts_with(w)) {
        return Vec::new();
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(home)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"."))
        .map(|e| e.path())
        .collect();
    out.extend(RUN_LATER.iter().filter_map(|raw| ctx.expand(raw).ok()));
    for dir in path.unwrap_or_default().split(':') {
        let d = Path::new(dir);
        let under_dot = d
            .strip_prefix(home)
            .ok()
            .and_then(|rest| rest.components().next())
            .is_some_and(|c| c.as_os_str().as_encoded_bytes().starts_with(b"."));
        if d.is_absolute() && under_dot {
            out.push(d.to_path_buf());
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_home_keeps_its_dot_entries_bin_and_path_read_only() {
        let t = tempfile::tempdir().unwrap();
        let h = std::fs::canonicalize(t.path()).unwrap();
        for d in [".config", ".local/bin", "work"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        std::fs::write(h.join(".gitconfig"), "").unwrap();
        std::fs::write(h.join("notes"), "").unwrap();
        let ctx = PathContext {
            env: [("HOME".to_string(), h.display().to_string())].into(),
            ..PathContext::default()
        };
        let path = format!(
            "/usr/bin:{}/.tool/bin:{}/work/bin",
            h.display(),
            h.display()
        );
        let writable = RulePaths {
            writable: vec![h.clone()],
            ..RulePaths::default()
        };
        let got = read_only_entries(&h, &writable, &ctx, Some(&path));
        for want in [
            ".config",
            ".local",
            ".gitconfig",
            "bin",
            ".config/git",
            ".tool/bin",
        ] {
            assert!(got.contains(&h.join(want)), "{want}: {got:?}");
        }
        assert!(!got.contains(&h.join("notes")) && !got.contains(&h.join("work/bin")));
        let not_writable = RulePaths {
            readable: vec![h.clone()],
            ..RulePaths::default()
        };
        assert!(read_only_entries(&h, &not_writable, &ctx, Some(&path)).is_empty());
    }
}
