//! The registry of benchmarks: each in its own module, run by name.

use std::path::PathBuf;

use crate::args::Flavour;

pub mod call;
pub mod call_cpu;
pub mod call_stream;
pub mod call_throughput;
pub mod discovery;
pub mod domains;
pub mod fixtures;
pub mod guard;
pub mod load;
pub mod mcp;
pub mod proxy;
pub mod proxy_tls;
pub mod remote;
pub mod rtt;
pub mod sandbox;
pub mod startup;
pub mod watch;

/// What every bench gets from the command line and the environment.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The `toolsrv` binary to start.
    pub bin: PathBuf,
    /// Measured iterations per figure, when given on the command line.
    pub iters: Option<usize>,
    /// The client runtime flavours to run on.
    pub flavours: Vec<Flavour>,
    /// Bytes the `call-stream` tool prints.
    pub stream_size: u64,
    /// An older `toolsrv` binary (`--before`, checked to be an executable
    /// file) that `call-cpu` and `startup` measure beside [`Ctx::bin`].
    pub before: Option<PathBuf>,
}

/// One benchmark.
#[derive(Debug, Clone, Copy)]
pub struct Bench {
    /// Its name on the command line.
    pub name: &'static str,
    /// One line on what it measures.
    pub about: &'static str,
    /// Run it, printing its report to stdout.
    pub run: fn(&Ctx) -> anyhow::Result<()>,
}

/// Every bench, in the order `toolsrv-bench` with no names runs them.
pub const ALL: &[Bench] = &[
    Bench {
        name: "rtt",
        about: "read_file(\"info\") round trip vs a raw Unix-socket echo",
        run: rtt::run,
    },
    Bench {
        name: "discovery",
        about: "`all` and `ctl load` over 1,000 generated tools vs readdir + stat",
        run: discovery::run,
    },
    Bench {
        name: "call",
        about: "call-rtt, call-throughput and call-stream, one after the other",
        run: call_all,
    },
    Bench {
        name: "mcp",
        about: "MCP tools/call through `toolsrv mcp` (stdio) vs the same call over 9P",
        run: mcp::run,
    },
    Bench {
        name: "sandbox",
        about: "sandboxed vs --yolo vs bwrap; spawn rate with 256 MiB of retained output",
        run: sandbox::run,
    },
    Bench {
        name: "startup",
        about: "the first sandboxed call of a fresh server (its filesystem view), at once and after 500 ms, vs a warm call",
        run: startup::run,
    },
    Bench {
        name: "watch",
        about: "create -> event received (tools namespace, fanotify) and create -> quarantined, p50/p99, vs inotify",
        run: watch::run,
    },
    Bench {
        name: "guard",
        about: "a sandboxed tool's creation of a protected path -> gone (the server's guard), p50/p99, vs the tool's own create + unlink",
        run: guard::run,
    },
    Bench {
        name: "proxy",
        about: "a 100 MiB download and the first byte through the network proxy (CONNECT) vs straight from the upstream, loopback",
        run: proxy::run,
    },
    Bench {
        name: "domains",
        about: "a sandboxed call under network.domains (a network namespace per run) vs the same policy without",
        run: domains::run,
    },
    Bench {
        name: "load",
        about: "32 agents x 1,000 mixed calls with 100 hostile idle connections: failures, zombies, descriptors, peak RSS",
        run: load::run,
    },
    Bench {
        name: "remote",
        about: "a call through the SSH-forwarded socket vs the same server's own socket",
        run: remote::run,
    },
];

/// Parts of a bench, selectable by name but not run when no names are given
/// (the bench that holds them runs them).
pub const PARTS: &[Bench] = &[
    Bench {
        name: "call-rtt",
        about: "sync call round trip of a trivial tool vs bare fork+exec+wait",
        run: call::run,
    },
    Bench {
        name: "call-throughput",
        about: "calls/s with 2, 8 and 32 concurrent agents vs a bare spawn loop",
        run: call_throughput::run,
    },
    Bench {
        name: "call-stream",
        about: "following proc/<pid>/out of a 1 GiB tool vs reading a pipe",
        run: call_stream::run,
    },
    Bench {
        name: "call-cpu",
        about: "server CPU per call and latency of this toolsrv vs an older one (--before PATH), interleaved, beside bare posix_spawn",
        run: call_cpu::run,
    },
];

/// The `call` bench: its three parts, one after the other.
fn call_all(ctx: &Ctx) -> anyhow::Result<()> {
    call::run(ctx)?;
    call_throughput::run(ctx)?;
    call_stream::run(ctx)
}

/// Build a tokio runtime of `flavour`.
pub fn runtime(flavour: Flavour) -> std::io::Result<tokio::runtime::Runtime> {
    match flavour {
        Flavour::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Flavour::MultiThread => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    }
}
