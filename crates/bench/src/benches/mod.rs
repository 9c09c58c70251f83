//! The registry of benchmarks: each in its own module, run by name.

use std::path::PathBuf;

use crate::args::Flavour;

pub mod rtt;

/// What every bench gets from the command line and the environment.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The `toolsrv` binary to start.
    pub bin: PathBuf,
    /// Measured iterations per figure, when given on the command line.
    pub iters: Option<usize>,
    /// The client runtime flavours to run on.
    pub flavours: Vec<Flavour>,
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
pub const ALL: &[Bench] = &[Bench {
    name: "rtt",
    about: "read_file(\"info\") round trip vs a raw Unix-socket echo",
    run: rtt::run,
}];

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
