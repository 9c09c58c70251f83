//! Argument files: open files a tool gets as its descriptors 3, 4, … (the
//! values of `file: true` arguments), readable through `/proc/self/fd/N`
//! under a Landlock ruleset that grants nothing of `/proc`.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};

use crate::spawn_support::{base_rules, confine, start_with_files};
use toolsrv_sandbox::{spawn, spawn_detached, Child, ExitStatus, SpawnError, SpawnSpec};

/// An anonymous file (`memfd_create`, as the server makes them) holding
/// `text`, rewound.
fn file_with(text: &str) -> std::fs::File {
    use std::io::{Seek, SeekFrom};
    use std::os::fd::FromRawFd;
    // Safety: a NUL-terminated name; the result is checked.
    let fd = unsafe { libc::memfd_create(c"arg".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // Safety: a fresh descriptor owned by nobody else.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.write_all(text.as_bytes()).expect("write");
    f.seek(SeekFrom::Start(0)).expect("rewind");
    f
}

/// `spawn` or `spawn_detached`.
type SpawnFn = fn(&SpawnSpec) -> Result<Child, SpawnError>;

fn output(r: OwnedFd) -> String {
    let mut out = String::new();
    std::fs::File::from(r)
        .read_to_string(&mut out)
        .expect("read tool output");
    out
}

#[test]
fn a_confined_tool_reads_its_argument_files_and_has_no_other_descriptor() {
    let big = "x".repeat(200_000);
    let rules = base_rules();
    assert!(
        !rules
            .ro
            .iter()
            .chain(&rules.rox)
            .any(|p| p.starts_with("/proc")),
        "the ruleset grants nothing of /proc"
    );
    let c = confine(&rules);
    let spawns: [(&str, SpawnFn); 2] = [("spawn", spawn), ("spawn_detached", spawn_detached)];
    for (name, spawn_fn) in spawns {
        let files = [file_with("first\n"), file_with(&big)];
        let fds: Vec<_> = files.iter().map(AsFd::as_fd).collect();
        let (mut child, r) = start_with_files(
            spawn_fn,
            &[
                "/bin/sh",
                "-c",
                "cat /proc/self/fd/3; wc -c < /proc/self/fd/4; cat <&3; \
                 for fd in $(seq 0 64); do [ -e /proc/self/fd/$fd ] && printf '%s ' $fd; done; echo",
            ],
            "/",
            &[],
            &fds,
            Some(&c),
        )
        .expect(name);
        let out = output(r);
        assert_eq!(
            child.wait().expect("wait"),
            ExitStatus::Code(0),
            "{name}: {out}"
        );
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("first"), "{name}: {out}");
        assert_eq!(lines.next(), Some("200000"), "{name}: {out}");
        assert_eq!(
            lines.next(),
            Some("first"),
            "{name}: the descriptor's offset is 0: {out}"
        );
        // 0-2 and the two files (the shell's test is a builtin: no
        // descriptor of its own).
        assert_eq!(lines.next(), Some("0 1 2 3 4 "), "{name}: {out}");
    }
}

#[test]
fn more_files_than_the_spawn_passes_are_refused() {
    let files: Vec<_> = (0..toolsrv_sandbox::MAX_FILES + 1)
        .map(|_| file_with("x"))
        .collect();
    let fds: Vec<_> = files.iter().map(AsFd::as_fd).collect();
    let Err(e) = start_with_files(spawn, &["/bin/true"], "/", &[], &fds, None) else {
        panic!("{} files were passed", fds.len());
    };
    assert!(e.to_string().contains("argument files"), "{e}");
}

/// A spec's `stdin` is what the tool reads, with both spawns; without one
/// the tool reads `/dev/null`.
#[test]
fn a_tool_reads_the_stdin_its_spec_gives_and_dev_null_without_one() {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    let argv: Vec<CString> = ["/bin/sh", "-c", "cat; echo end"]
        .iter()
        .map(|a| CString::new(*a).expect("no NUL"))
        .collect();
    let envp = [CString::new("PATH=/usr/bin:/bin").expect("no NUL")];
    let cwd = CString::new("/").expect("no NUL");
    let spawns: [(&str, SpawnFn); 2] = [("spawn", spawn), ("spawn_detached", spawn_detached)];
    for (name, spawn_fn) in spawns {
        for given in [Some(file_with("from stdin\n")), None] {
            let (r, w) = std::io::pipe().expect("pipe");
            let w = OwnedFd::from(w);
            let spec = SpawnSpec {
                program: &argv[0],
                argv: &argv,
                envp: &envp,
                cwd: &cwd,
                cwd_fd: None,
                mount_ns: None,
                net_ns: None,
                user_ns: None,
                stdin: given.as_ref().map(AsFd::as_fd),
                output: w.as_fd(),
                files: &[],
                confinement: None,
                join: Default::default(),
            };
            let mut child = spawn_fn(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
            drop(w);
            let out = output(OwnedFd::from(r));
            assert_eq!(child.wait().expect("wait"), ExitStatus::Code(0), "{name}");
            let want = if given.is_some() {
                "from stdin\nend\n"
            } else {
                "end\n"
            };
            assert_eq!(
                out,
                want,
                "{name}, stdin {:?}",
                given.as_ref().map(AsRawFd::as_raw_fd)
            );
        }
    }
}
