//! Write the fuzz seed corpus: one file per sample frame of every message type.
//!
//! Usage: `cargo run -p toolsrv-wire --example seed_corpus -- fuzz/corpus/decode`

// An example program: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use toolsrv_wire::{encode_to_vec, msgtype, samples};

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(
        std::env::args_os()
            .nth(1)
            .unwrap_or_else(|| "fuzz/corpus/decode".into()),
    );
    std::fs::create_dir_all(&dir)?;
    let frames = samples::every_message();
    for frame in &frames {
        let name = msgtype::name(frame.body.type_id()).unwrap_or("unknown");
        std::fs::write(dir.join(format!("seed-{name}")), encode_to_vec(frame))?;
    }
    let mut stat = Vec::new();
    toolsrv_wire::encode_stat(&samples::stat(), &mut stat);
    std::fs::write(dir.join("seed-stat-entry"), stat)?;
    println!("wrote {} seeds to {}", frames.len() + 1, dir.display());
    Ok(())
}
