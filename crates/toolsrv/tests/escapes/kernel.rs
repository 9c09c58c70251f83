//! Escape regressions, kernel side (issue 14, holes 1, 4, 5 and System V IPC
//! from hole 6): each case is an attack a sandboxed tool made against a root
//! server with the default rules, run here as it was found, over the socket,
//! with real processes and real Landlock and seccomp. The doc comment of each
//! test names the attack, what the tool must see, and the finding.
//!
//! Every wait is on a condition with a deadline; nothing sleeps. Network
//! cases use loopback addresses only.

use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::sandbox::{outside_dir, Fixture, Mode, Policy, EPERM};
use crate::util::{wait_until, WAIT};

/// A server with the test policy (the default rules plus the fixture's
/// directories), changed by `edit`.
fn fixture(edit: impl FnOnce(&mut Policy)) -> Fixture {
    let outside = outside_dir();
    let mut policy = Policy::new(outside.path());
    edit(&mut policy);
    Fixture::start(outside, Mode::File(policy), &[], &[], None)
}

/// Python inside a tool: the system interpreter (the one in `PATH` may live
/// in a home directory no rule grants).
const PY: &str = "/usr/bin/python3";

/// Files under `dir` (recursively, links not followed) whose mode has
/// `S_ISUID` or `S_ISGID`.
fn set_id_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if meta.is_dir() {
            found.extend(set_id_files(&e.path()));
        } else if !meta.file_type().is_symlink() && meta.mode() & 0o6000 != 0 {
            found.push(format!("{} {:o}", e.path().display(), meta.mode() & 0o7777));
        }
    }
    found
}

/// Files under `dir` carrying a `security.capability` attribute.
fn capable_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("path");
        let mut buf = [0u8; 64];
        // Safety: `c` and `buf` outlive the call; lgetxattr writes at most `buf.len()` bytes.
        let n = unsafe {
            libc::lgetxattr(
                c.as_ptr(),
                c"security.capability".as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n >= 0 {
            found.push(p.display().to_string());
        }
    }
    found
}

/// **Attack:** a background tool swaps a directory `d` of the working
/// directory with a symbolic link `l -> /` in a loop
/// (`renameat2(RENAME_EXCHANGE)`), while ~150 requests with `cwd=d` try to
/// write into a directory outside every rule; then, with the swapping
/// stopped, more requests with `cwd=d` try the same. The requests name one of
/// 30 identical sandbox profiles in turn, so that the rules are resolved
/// afresh ~30 times during the race instead of once per 2 s cache period
/// (the cache made the window rarer, it did not close it).
///
/// **Expected:** no file is ever written outside. Each request either runs
/// in the real `d` (and its write outside fails) or is refused with
/// `working directory "d" is outside the server's --cwd` (or, met mid-swap,
/// `… does not exist`); after the race,
/// every request runs in `d`, can write there, and nowhere else.
///
/// **Guards:** issue 14, hole 1: the `cwd=` check, the canonicalisation of
/// `{CWD}` and the open of the rule's path happened at three different
/// times; one win gave a ruleset with rwx on `/`, and the rules cache, keyed
/// by the path, kept handing it out after the race.
#[test]
fn escape_a_working_directory_swapped_for_a_link_to_root_never_widens_the_sandbox() {
    let mut f = fixture(|_| {});
    let cwd = f.cwd().to_path_buf();
    let policy = std::fs::read_to_string(f.policy_file()).expect("policy");
    let profiles: Vec<String> = (0..30).map(|i| format!("p{i:02}")).collect();
    for p in &profiles {
        std::fs::write(f.out(&format!("policy/sandbox/{p}.yaml")), &policy).expect("profile");
    }
    let mut profile = profiles.iter().cycle();
    std::fs::create_dir(cwd.join("d")).expect("mkdir d");
    std::os::unix::fs::symlink("/", cwd.join("l")).expect("symlink l");
    let target = f.out("secret");
    let swapper = format!(
        r#"{PY} -c '
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
end = time.monotonic() + 60
open("swapping", "w").close()
i = 0
while not os.path.exists("stop") and time.monotonic() < end:
    libc.renameat2(-100, b"d", -100, b"l", 2)
    i += 1
    if i % 1000 == 0:
        time.sleep(0.001)  # leave the server (and the machine) a CPU
print("swaps", i, "stopped" if os.path.exists("stop") else "timed out")
for _ in range(100):
    if not os.path.islink("d"):
        break
    if libc.renameat2(-100, b"d", -100, b"l", 2) != 0:
        print("swap back failed: errno", ctypes.get_errno())
        time.sleep(0.01)
print("d is a link" if os.path.islink("d") else "d is a directory")
'"#
    );
    let payload =
        toolsrv_protocol::encode_payload(&[("tool", "sh"), ("agent", "a1"), ("script", &swapper)]);
    let pid = f
        .conn()
        .ask("proc/new.bg", &payload)
        .expect("swapper starts");
    assert!(
        wait_until(WAIT, || cwd.join("swapping").exists()),
        "the swapper did not start"
    );
    let write_outside = format!(
        "(echo escaped > {}/escaped-$$) 2>/dev/null; echo ran",
        target.display()
    );
    let (mut ran, mut refused) = (0, 0);
    let start = Instant::now();
    for _ in 0..150 {
        let p = profile.next().expect("cycle");
        let o = f.call("a1", "sh", &write_outside, &[("cwd", "d"), ("sandbox", p)]);
        if !o.is_error && o.text.contains("ran") {
            ran += 1;
        } else {
            // A refusal: the name led out of the workspace, or the lookup
            // met it mid-swap (about 1 run in 10 sees one `does not exist`).
            assert!(
                o.text.contains("is outside the server's --cwd")
                    || o.text.contains("working directory \"d\" does not exist"),
                "unexpected result: {o:?}"
            );
            refused += 1;
        }
        if start.elapsed() > Duration::from_secs(30) {
            break;
        }
    }
    std::fs::write(cwd.join("stop"), "").expect("stop the swapper");
    let wait = f.conn().read_file(&format!("proc/{pid}/wait"));
    assert!(!wait.is_empty(), "the swapper's wait answered nothing");
    let said =
        String::from_utf8_lossy(&f.conn().read_file(&format!("proc/{pid}/out"))).into_owned();
    let d_is_dir = || {
        std::fs::symlink_metadata(cwd.join("d"))
            .expect("d")
            .is_dir()
    };
    if !d_is_dir() {
        // The swapper says how it ended: a swap back that the view refused
        // is this test's failure; a swapper that never got to say (killed
        // mid-swap: seen once in CI, cause unknown) is reported, and the
        // race's result is still checked with d put back from outside.
        let wait = String::from_utf8_lossy(&wait);
        assert!(
            !said.contains("swaps "),
            "the swapper ended but did not leave d a directory: wait {wait:?}, out {said:?}"
        );
        eprintln!(
            "the swapper did not finish (wait {wait:?}, out {said:?}): d is put back from outside"
        );
        let exchanged = std::process::Command::new(PY)
            .current_dir(&cwd)
            .args([
                "-c",
                "import ctypes; assert ctypes.CDLL(None).renameat2(-100, b'd', -100, b'l', 2) == 0",
            ])
            .status()
            .expect("run python3");
        assert!(exchanged.success() && d_is_dir(), "d could not be put back");
    }
    let escaped = |t: &Path| {
        std::fs::read_dir(t)
            .expect("read_dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("escaped-"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        escaped(&target),
        Vec::<String>::new(),
        "written outside during the race ({ran} ran, {refused} refused)"
    );
    assert!(ran > 0, "no request ran in d during the race");
    // After the race: the same requests, nothing cached from it widens them.
    for (i, p) in profiles.iter().enumerate() {
        let o = f.call(
            "a1",
            "sh",
            &format!("touch inside-{i} && {write_outside}"),
            &[("cwd", "d"), ("sandbox", p)],
        );
        assert_eq!(o.ok(), "ran\n");
        assert!(cwd.join(format!("d/inside-{i}")).exists());
    }
    assert_eq!(
        escaped(&target),
        Vec::<String>::new(),
        "written outside after the race"
    );
}

/// **Attack:** as root, make a set-user-ID or set-group-ID file in the
/// working directory: `chmod 4755` and `chmod g+s` of a copied shell,
/// `install -m 4755`, `open(O_CREAT)` with mode 04755 (python3) or 02755
/// (perl), `mknod` of a regular file with mode 06755, and rewriting an
/// existing set-user-ID file (`cat /bin/sh > suid`), which keeps the bit
/// while the tool holds CAP_FSETID. Then give a file a file capability:
/// `setcap cap_net_raw+ep`, a raw `setxattr` of `security.capability`
/// (python3), and `setcap` inside a new user namespace mapping uid 0 to
/// itself (`unshare -U --map-user=0`), where the tool would hold every
/// capability again.
///
/// **Expected:** each call fails with `EPERM` ("Operation not permitted"),
/// the rewritten file loses its set-id bits, no file in the working
/// directory ends with a mode in 06000 and none carries
/// `security.capability` (CAP_SETFCAP is dropped, and without it the kernel
/// refuses to map uid 0 in a new user namespace). The same `chmod 4755` works
/// under `--yolo` (the control).
///
/// **Guards:** issue 14, hole 4: a tool of a root server kept
/// CHOWN/FOWNER/FSETID and nothing refused the mode bits, so any local user
/// could run a root shell the tool left behind (the file capability part was
/// already refused since session 4 dropped CAP_SETFCAP; it is kept here so
/// that it stays so).
#[test]
fn escape_set_id_files_and_file_capabilities_cannot_be_made_inside() {
    let mut f = fixture(|_| {});
    let cwd = f.cwd().to_path_buf();
    let suid = cwd.join("suid");
    std::fs::copy("/bin/true", &suid).expect("copy");
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).expect("chmod");
    let script = format!(
        r#"
cp /bin/sh sh1; chmod 4755 sh1; echo "chmod=$?"
chmod g+s sh1; echo "chmod-g=$?"
install -m 4755 /bin/sh sh2; echo "install=$?"
{PY} -c 'import os; os.open("py", os.O_CREAT | os.O_WRONLY, 0o4755)'; echo "python-open=$?"
/usr/bin/perl -e 'use Fcntl; sysopen(F, "pl", O_CREAT | O_WRONLY, 02755) or die "sysopen: $!\n"'; echo "perl-sysopen=$?"
{PY} -c 'import os, stat; os.mknod("nod", stat.S_IFREG | 0o6755)'; echo "mknod=$?"
cat /bin/sh > suid; echo "rewrite=$?"
cp /bin/true t
/usr/sbin/setcap cap_net_raw+ep t; echo "setcap=$?"
{PY} -c 'import os; os.setxattr("t", "security.capability", bytes.fromhex("0100000200200000000000000000000000000000"))'; echo "setxattr=$?"
unshare -U --map-user=0 --map-group=0 /usr/sbin/setcap cap_net_raw+ep t; echo "userns=$?"
"#
    );
    let o = f.bash(&script);
    for step in [
        "chmod",
        "chmod-g",
        "install",
        "python-open",
        "perl-sysopen",
        "mknod",
        "setcap",
        "setxattr",
        "userns",
    ] {
        let done = format!("{step}=0");
        assert!(
            !o.text.lines().any(|l| l == done),
            "{step} succeeded: {o:?}"
        );
    }
    assert!(o.text.contains("rewrite=0"), "{o:?}");
    assert!(o.text.contains(EPERM), "{o:?}");
    assert_eq!(set_id_files(&cwd), Vec::<String>::new(), "{o:?}");
    assert_eq!(capable_files(&cwd), Vec::<String>::new(), "{o:?}");
    // The control: without the sandbox the same chmod works.
    let mut yolo = Fixture::new(Mode::EmbeddedDefault, &["--yolo"]);
    let o = yolo.sh("cp /bin/true t && chmod 4755 t && stat -c %a t");
    assert_eq!(o.ok(), "4755\n");
}

/// The System V IPC objects with `key` that exist now, as `ipcs` lists them.
fn ipc_objects_with_key(key: u32) -> Vec<String> {
    let out = std::process::Command::new("ipcs")
        .output()
        .expect("run ipcs outside the sandbox");
    assert!(out.status.success(), "ipcs failed");
    let hex = format!("0x{key:08x}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(hex.as_str()))
        .map(str::to_string)
        .collect()
}

/// **Attack:** create System V shared memory, a semaphore set and a message
/// queue (perl's `shmget`/`semget`/`msgget` with a known key, and `ipcmk`),
/// which outlive the run and which every process of the host can see.
///
/// **Expected:** each creation fails with `EPERM`; after the run, `ipcs`
/// (outside) lists no object with the key. `ipcmk` outside the sandbox
/// works (the control).
///
/// **Guards:** issue 14, hole 6 (System V IPC): Landlock does not cover IPC
/// objects; a tool's objects persisted after it and were visible outside.
#[test]
fn escape_system_v_ipc_objects_are_not_made_inside() {
    let key: u32 = 0x7e57_0000 | (std::process::id() & 0xffff);
    let mut f = fixture(|_| {});
    let script = format!(
        r#"
/usr/bin/perl -e 'use IPC::SysV qw(IPC_CREAT);
  defined(shmget({key}, 4096, IPC_CREAT | 0600)) or print "shmget: $!\n";
  defined(semget({key}, 1, IPC_CREAT | 0600)) or print "semget: $!\n";
  defined(msgget({key}, IPC_CREAT | 0600)) or print "msgget: $!\n";'
ipcmk -M 4096; echo "ipcmk=$?"
"#
    );
    let o = f.bash(&script);
    let left = ipc_objects_with_key(key);
    // Clean up whatever got through before judging.
    for flag in ["-M", "-S", "-Q"] {
        let _ = std::process::Command::new("ipcrm")
            .args([flag, &key.to_string()])
            .output();
    }
    for call in ["shmget", "semget", "msgget"] {
        assert!(
            o.text.contains(&format!("{call}: {EPERM}")),
            "{call}: {o:?}"
        );
    }
    assert!(!o.text.contains("ipcmk=0"), "{o:?}");
    assert_eq!(
        left,
        Vec::<String>::new(),
        "objects made inside are visible outside"
    );
    // The control: outside the sandbox ipcmk works.
    let out = std::process::Command::new("ipcmk")
        .args(["-M", "4096"])
        .output()
        .expect("ipcmk");
    assert!(out.status.success(), "ipcmk outside: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    if let Some(id) = text.split_whitespace().last() {
        let _ = std::process::Command::new("ipcrm")
            .args(["-m", id])
            .output();
    }
}

/// Whether `l` accepted a connection within a short grace (non-blocking
/// accepts, retried).
fn accepted(l: &TcpListener) -> bool {
    l.set_nonblocking(true).expect("nonblocking");
    wait_until(Duration::from_millis(500), || l.accept().is_ok())
}

/// **Attack:** with `connect_tcp: [A]`, reach another loopback port B through
/// an MPTCP socket (`socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)` then
/// `connect`) and through `sendto(..., MSG_FASTOPEN, B)` on a TCP socket,
/// which connects without `connect(2)`; and set up io_uring, which makes
/// sockets without `socket(2)`.
///
/// **Expected:** the MPTCP socket, the Fast Open send and `io_uring_setup`
/// fail with `EACCES`; the listener on B accepts nothing. A plain TCP connect
/// to A works, and so does UDP (`socket(AF_INET, SOCK_DGRAM, 0)` and a
/// datagram to a loopback port), which the TCP lists do not restrict.
///
/// **Guards:** issue 14, hole 5: Landlock (ABI 7) checks `connect(2)` and
/// `bind(2)` of TCP sockets only, and no seccomp filter was installed while
/// the network was enabled.
#[test]
fn escape_tcp_port_lists_are_not_sidestepped_by_mptcp_or_fast_open() {
    let a = TcpListener::bind("127.0.0.1:0").expect("listener A");
    let b = TcpListener::bind("127.0.0.1:0").expect("listener B");
    let (port_a, port_b) = (
        a.local_addr().expect("A").port(),
        b.local_addr().expect("B").port(),
    );
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
    let port_u = udp.local_addr().expect("udp addr").port();
    udp.set_read_timeout(Some(WAIT)).expect("timeout");
    let mut f = fixture(|p| p.connect_tcp = vec![port_a]);
    let script = format!(
        r#"{PY} -c '
import ctypes, errno, socket
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
def mptcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
    s.settimeout(5)
    s.connect(("127.0.0.1", {port_b}))
def fast_open():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    s.sendto(b"x", 0x20000000, ("127.0.0.1", {port_b}))
def io_uring():
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    if libc.syscall(425, 1, params) < 0:
        raise OSError(ctypes.get_errno(), "io_uring_setup")
def udp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM, 0).sendto(b"probe", ("127.0.0.1", {port_u}))
attempt("mptcp", mptcp)
attempt("fastopen", fast_open)
attempt("io_uring", io_uring)
attempt("plain", lambda: socket.create_connection(("127.0.0.1", {port_a}), timeout=5).close())
attempt("udp", udp)
'"#
    );
    let o = f.sh(&script);
    let text = o.ok();
    assert!(
        !accepted(&b),
        "a connection reached the unlisted port: {text}"
    );
    for line in [
        "mptcp EACCES",
        "fastopen EACCES",
        "io_uring EACCES",
        "plain ok",
        "udp ok",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} missing: {text}");
    }
    assert!(accepted(&a), "the listed port got no connection");
    let mut buf = [0u8; 16];
    let n = udp.recv(&mut buf).expect("the datagram arrives");
    assert_eq!(&buf[..n], b"probe");
}
