//! Tools directories written by the benches: the few tools the call and
//! sandbox benches run, and a large generated directory for discovery.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A metadata-only tool whose command is `true` (so it runs `/bin/sh -c true`).
pub const TRUE_SH: &str = "true_sh";
/// A tool whose program is `/bin/true` (`executable: /bin/true`).
pub const TRUE_EXEC: &str = "true_exec";
/// `head -c {bytes} /dev/zero`: prints `bytes` zero bytes.
pub const ZEROS: &str = "zeros";

/// A new temporary directory (named `<prefix>…`, removed on drop) holding
/// the bench tools ([`write_bench_tools`]).
pub fn bench_tools_dir(prefix: &str) -> anyhow::Result<tempfile::TempDir> {
    use anyhow::Context;
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .context("cannot create the tools directory")?;
    write_bench_tools(dir.path()).context("cannot write the bench tools")?;
    Ok(dir)
}

/// Write the tools the call and sandbox benches run into `dir` (created).
pub fn write_bench_tools(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join(format!("{TRUE_SH}.yaml")),
        "description: runs /bin/sh -c true\ncommand: \"true\"\n",
    )?;
    std::fs::write(
        dir.join(format!("{TRUE_EXEC}.yaml")),
        "description: runs /bin/true\nexecutable: /bin/true\n",
    )?;
    std::fs::write(
        dir.join(format!("{ZEROS}.yaml")),
        "description: prints zero bytes\n\
         params:\n  bytes: {type: integer, description: how many, required: true}\n\
         command: \"head -c {bytes} /dev/zero\"\n\
         timeout: 10m\n",
    )?;
    Ok(())
}

/// The shape of generated tool `i`: a metadata-only sidecar, an executable
/// script with a sidecar, or an executable script with a header block.
fn shape(i: usize) -> usize {
    i % 3
}

/// The name of generated tool `i`.
pub fn generated_name(i: usize) -> String {
    format!("tool_{i:04}")
}

/// Write `n` generated tools into `dir` (created): a third metadata-only
/// `NAME.yaml` with a command template, a third executable scripts with a
/// `NAME.yaml` sidecar, a third executable scripts with a header block.
/// Returns how many files were written.
pub fn generate(dir: &Path, n: usize) -> io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let mut files = 0;
    for i in 0..n {
        let name = generated_name(i);
        let sidecar = format!(
            "description: generated tool {i} that counts the lines of a file\n\
             params:\n  path: {{type: string, description: File to count, required: true}}\n  \
             limit: {{type: integer, description: Stop after this many, default: 100}}\n"
        );
        match shape(i) {
            0 => {
                std::fs::write(
                    dir.join(format!("{name}.yaml")),
                    format!("{sidecar}command: \"head -n {{limit}} -- {{path}} | wc -l\"\n"),
                )?;
                files += 1;
            }
            1 => {
                std::fs::write(dir.join(format!("{name}.yaml")), sidecar)?;
                write_script(&dir.join(&name), "#!/bin/sh\nexec wc -l -- \"$ARG_PATH\"\n")?;
                files += 2;
            }
            _ => {
                let script = format!(
                    "#!/bin/sh\n# ---\n# description: generated tool {i} that counts the lines of a file\n\
                     # params:\n#   path: {{type: string, description: File to count, required: true}}\n\
                     # ---\nexec wc -l -- \"$ARG_PATH\"\n"
                );
                write_script(&dir.join(&name), &script)?;
                files += 1;
            }
        }
    }
    Ok(files)
}

fn write_script(path: &Path, text: &str) -> io::Result<()> {
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

/// Change the ctime of every file in `dir` (a chmod to the same mode), so a
/// cache keyed on file stats sees every file as changed.
pub fn touch_all(dir: &Path) -> io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let perms = e.metadata()?.permissions();
        std::fs::set_permissions(e.path(), perms)?;
    }
    Ok(())
}

/// The baseline for discovery: list `dir` and `stat` every entry, as
/// discovery must at least do. Returns the number of entries.
pub fn readdir_stat(dir: &Path) -> io::Result<usize> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        std::fs::metadata(e.path())?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn generate_writes_every_shape() {
        let d = tempfile::tempdir().expect("tempdir");
        let files = generate(d.path(), 7).expect("generate");
        // shapes 0,1,2,0,1,2,0: 3 + 2*2 + 2 = 9 files
        assert_eq!(files, 9);
        assert_eq!(readdir_stat(d.path()).expect("list"), 9);
        let meta_only = std::fs::read_to_string(d.path().join("tool_0000.yaml")).expect("read");
        assert!(meta_only.contains("command:"), "{meta_only}");
        assert!(!d.path().join("tool_0000").exists());
        let script = d.path().join("tool_0001");
        assert_eq!(
            std::fs::metadata(&script)
                .expect("stat")
                .permissions()
                .mode()
                & 0o777,
            0o755
        );
        assert!(d.path().join("tool_0001.yaml").is_file());
        let header = std::fs::read_to_string(d.path().join("tool_0002")).expect("read");
        assert!(header.contains("# ---\n# description:"), "{header}");
        assert!(!d.path().join("tool_0002.yaml").exists());
    }

    #[test]
    fn touch_all_changes_ctime() {
        let d = tempfile::tempdir().expect("tempdir");
        write_bench_tools(d.path()).expect("write");
        let p = d.path().join("zeros.yaml");
        let before = std::fs::metadata(&p).expect("stat");
        let start = std::time::Instant::now();
        loop {
            touch_all(d.path()).expect("touch");
            let after = std::fs::metadata(&p).expect("stat");
            if (after.ctime(), after.ctime_nsec()) != (before.ctime(), before.ctime_nsec()) {
                break;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "ctime never changed"
            );
        }
    }
}
