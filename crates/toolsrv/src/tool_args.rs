//! The `key=value` arguments of `call` and `bg`: `key=@path` takes the value
//! from a file, `key=@-` from standard input, and `key=@@text` is the value
//! `@text` (a leading `@` doubled).

use std::ffi::OsString;
use std::io::Read;

use anyhow::{bail, Context, Result};

/// The arguments as `(key, value)`, each value read where it says.
pub(crate) fn parse(args: &[OsString]) -> Result<Vec<(String, String)>> {
    let mut stdin_used: Option<String> = None;
    let mut out = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        let Some(arg) = arg.to_str() else {
            bail!(
                "tool argument {} ({}) is not valid UTF-8: tool arguments are text (pass binary data base64-encoded, or in a file the tool reads)",
                i + 1,
                crate::output::for_terminal(&arg.to_string_lossy())
            );
        };
        let Some((k, v)) = arg.split_once('=') else {
            bail!("argument {arg:?} is not key=value");
        };
        if k.is_empty() {
            bail!("argument {arg:?} has an empty key");
        }
        let value = match v.strip_prefix('@') {
            None => v.to_string(),
            Some(rest) if rest.starts_with('@') => rest.to_string(),
            Some("-") => {
                if let Some(first) = &stdin_used {
                    bail!("{k}=@- and {first}=@- both read standard input; only one argument can");
                }
                stdin_used = Some(k.to_string());
                let mut buf = Vec::new();
                std::io::stdin()
                    .read_to_end(&mut buf)
                    .with_context(|| format!("{k}=@-: cannot read standard input"))?;
                text(k, "standard input", buf)?
            }
            Some(path) => {
                if path.is_empty() {
                    bail!("{k}=@ names no file: write {k}=@PATH, {k}=@- for standard input, or {k}=@@ for the value \"@\"");
                }
                let buf = std::fs::read(path)
                    .with_context(|| format!("{k}=@{path}: cannot read {path}"))?;
                text(k, path, buf)?
            }
        };
        out.push((k.to_string(), value));
    }
    Ok(out)
}

/// `buf` as text, or an error naming the argument and where it came from.
fn text(key: &str, from: &str, buf: Vec<u8>) -> Result<String> {
    String::from_utf8(buf).map_err(|e| {
        anyhow::anyhow!(
            "{key}: {from} is not UTF-8 text (invalid byte at offset {}): tool arguments are text",
            e.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn values_come_from_files_or_stay_as_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("v.txt");
        std::fs::write(&f, "from a file\n").expect("write");
        let got = parse(&os(&[
            "a=plain=with=equals",
            &format!("b=@{}", f.display()),
            "c=@@home",
            "d=",
        ]))
        .expect("parse");
        assert_eq!(
            got,
            [
                ("a".to_string(), "plain=with=equals".to_string()),
                ("b".into(), "from a file\n".into()),
                ("c".into(), "@home".into()),
                ("d".into(), "".into()),
            ]
        );
    }

    #[test]
    fn bad_arguments_are_named() {
        let e = parse(&[
            OsString::from("a=1"),
            OsString::from_vec(b"path=\xffx".to_vec()),
        ])
        .expect_err("not UTF-8")
        .to_string();
        assert!(
            e.starts_with("tool argument 2 (path=\u{fffd}x) is not valid UTF-8"),
            "{e}"
        );
        let e = parse(&os(&["content=@/nonexistent/toolsrv-x"])).expect_err("missing");
        assert!(
            format!("{e:#}").starts_with(
                "content=@/nonexistent/toolsrv-x: cannot read /nonexistent/toolsrv-x: No such file"
            ),
            "{e:#}"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("bin");
        std::fs::write(&f, b"ok\xfe").expect("write");
        let e = parse(&[OsString::from(format!("c=@{}", f.display()))]).expect_err("binary");
        assert!(
            e.to_string()
                .contains("is not UTF-8 text (invalid byte at offset 2)"),
            "{e}"
        );
        let e = parse(&os(&["c=@"])).expect_err("empty");
        assert!(e.to_string().contains("names no file"), "{e}");
    }
}
