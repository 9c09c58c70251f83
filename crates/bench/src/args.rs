//! The command line: `toolsrv-bench [NAME...] [--iters N] [--runtime current|multi|both]
//! [--stream-size S] [--before PATH]`.

use std::path::PathBuf;

/// Which tokio runtime flavour the client side of a bench runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// `new_current_thread` (what the `toolsrv` CLI client uses).
    CurrentThread,
    /// `new_multi_thread` with one worker per core.
    MultiThread,
}

impl Flavour {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Flavour::CurrentThread => "current_thread",
            Flavour::MultiThread => "multi_thread",
        }
    }
}

/// Parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// The benches to run, in order; empty means all.
    pub names: Vec<String>,
    /// Measured iterations per figure (after warm-up); `None` means each bench's default.
    pub iters: Option<usize>,
    /// The runtime flavours to run the client on.
    pub flavours: Vec<Flavour>,
    /// Bytes the streaming bench's tool prints (`--stream-size`).
    pub stream_size: u64,
    /// An older `toolsrv` binary that `call-cpu` and `startup` measure
    /// beside the current one (`--before`); checked by the caller, not here.
    pub before: Option<PathBuf>,
    /// `--help` was given.
    pub help: bool,
}

/// The default of `--stream-size`: 1 GiB.
pub const DEFAULT_STREAM_SIZE: u64 = 1 << 30;

/// A command line that cannot be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgsError {
    /// A flag that needs a value came last.
    #[error("option {0} needs a value")]
    MissingValue(String),
    /// `--iters` with something other than a positive integer.
    #[error("--iters {0:?} is not a positive whole number")]
    BadIters(String),
    /// `--runtime` with an unknown flavour.
    #[error("--runtime {0:?} is not one of current, multi, both")]
    BadRuntime(String),
    /// `--stream-size` with something that is not a size.
    #[error("--stream-size {0:?} is not a positive size (bytes, or with KiB, MiB or GiB)")]
    BadSize(String),
    /// A flag this program does not know.
    #[error("unknown option {0:?} (try --help)")]
    UnknownOption(String),
}

/// The usage text.
pub const USAGE: &str = "\
usage: toolsrv-bench [NAME...] [--iters N] [--runtime current|multi|both] [--stream-size S]
                     [--before PATH]

Runs the named benchmarks (default: all) against the real toolsrv binary
(target/release/toolsrv next to this executable, or $TOOLSRV_BIN) and prints
each figure beside a baseline measured in the same run.

  --iters N      measured iterations per figure, after warm-up (default per bench)
  --runtime R    client runtime flavour: current (default), multi, or both
  --stream-size S  bytes the call-stream tool prints (default 1GiB; KiB/MiB/GiB)
  --before PATH  an older toolsrv binary: call-cpu measures its server CPU per
                 call and latency beside this one's, interleaved in one run
                 (e.g. toolsrv-bench call-cpu --before /tmp/toolsrv.old);
                 startup the first call of a fresh server
";

impl Args {
    /// Parse the arguments after the program name.
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Args, ArgsError> {
        let mut out = Args {
            names: Vec::new(),
            iters: None,
            flavours: vec![Flavour::CurrentThread],
            stream_size: DEFAULT_STREAM_SIZE,
            before: None,
            help: false,
        };
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (a.clone(), None),
            };
            let mut value = |flag: &str| {
                inline
                    .clone()
                    .or_else(|| it.next())
                    .ok_or_else(|| ArgsError::MissingValue(flag.to_string()))
            };
            match flag.as_str() {
                "-h" | "--help" => out.help = true,
                "--iters" => {
                    let v = value("--iters")?;
                    match v.parse::<usize>() {
                        Ok(n) if n > 0 => out.iters = Some(n),
                        _ => return Err(ArgsError::BadIters(v)),
                    }
                }
                "--runtime" => {
                    let v = value("--runtime")?;
                    out.flavours = match v.as_str() {
                        "current" => vec![Flavour::CurrentThread],
                        "multi" => vec![Flavour::MultiThread],
                        "both" => vec![Flavour::CurrentThread, Flavour::MultiThread],
                        _ => return Err(ArgsError::BadRuntime(v)),
                    };
                }
                "--stream-size" => {
                    let v = value("--stream-size")?;
                    out.stream_size = parse_size(&v).ok_or(ArgsError::BadSize(v))?;
                }
                "--before" => out.before = Some(PathBuf::from(value("--before")?)),
                f if f.starts_with('-') => return Err(ArgsError::UnknownOption(a)),
                _ => out.names.push(a),
            }
        }
        Ok(out)
    }
}

/// A positive size: a whole number of bytes, optionally with KiB, MiB or GiB.
fn parse_size(v: &str) -> Option<u64> {
    let (num, mult) = [("KiB", 1u64 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)]
        .iter()
        .find_map(|(suf, m)| v.strip_suffix(suf).map(|n| (n, *m)))
        .unwrap_or((v, 1));
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Args, ArgsError> {
        Args::parse(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn defaults() {
        let a = parse(&[]).expect("parses");
        assert!(a.names.is_empty());
        assert_eq!(a.iters, None);
        assert_eq!(a.flavours, [Flavour::CurrentThread]);
        assert_eq!(a.before, None);
        assert!(!a.help);
    }

    #[test]
    fn before_takes_a_path() {
        let a = parse(&["call-cpu", "--before", "/tmp/old toolsrv"]).expect("parses");
        assert_eq!(a.names, ["call-cpu"]);
        assert_eq!(a.before, Some(PathBuf::from("/tmp/old toolsrv")));
        let a = parse(&["--before=rel/toolsrv"]).expect("parses");
        assert_eq!(a.before, Some(PathBuf::from("rel/toolsrv")));
        assert_eq!(
            parse(&["--before"]),
            Err(ArgsError::MissingValue("--before".into()))
        );
    }

    #[test]
    fn names_iters_and_runtime() {
        let a = parse(&["rtt", "--iters", "500", "other", "--runtime=both"]).expect("parses");
        assert_eq!(a.names, ["rtt", "other"]);
        assert_eq!(a.iters, Some(500));
        assert_eq!(a.flavours, [Flavour::CurrentThread, Flavour::MultiThread]);
        assert_eq!(parse(&["--iters=7"]).expect("parses").iters, Some(7));
    }

    #[test]
    fn stream_size_takes_units() {
        assert_eq!(parse(&[]).expect("parses").stream_size, 1 << 30);
        assert_eq!(
            parse(&["--stream-size", "64MiB"])
                .expect("parses")
                .stream_size,
            64 << 20
        );
        assert_eq!(
            parse(&["--stream-size=1000"]).expect("parses").stream_size,
            1000
        );
        assert_eq!(
            parse(&["--stream-size", "0KiB"]),
            Err(ArgsError::BadSize("0KiB".into()))
        );
        assert_eq!(
            parse(&["--stream-size", "1GB"]).unwrap_err().to_string(),
            "--stream-size \"1GB\" is not a positive size (bytes, or with KiB, MiB or GiB)"
        );
    }

    #[test]
    fn errors_name_the_value() {
        assert_eq!(
            parse(&["--iters", "0"]),
            Err(ArgsError::BadIters("0".into()))
        );
        assert_eq!(
            parse(&["--iters", "x"]).unwrap_err().to_string(),
            "--iters \"x\" is not a positive whole number"
        );
        assert_eq!(
            parse(&["--iters"]),
            Err(ArgsError::MissingValue("--iters".into()))
        );
        assert_eq!(
            parse(&["--runtime", "fast"]),
            Err(ArgsError::BadRuntime("fast".into()))
        );
        assert_eq!(
            parse(&["--bogus"]),
            Err(ArgsError::UnknownOption("--bogus".into()))
        );
    }
}
