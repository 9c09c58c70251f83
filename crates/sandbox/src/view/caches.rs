//! Package caches the human's own builds read: tools may use and fill them,
//! but what they change in files already there never reaches the human's
//! copy. A writable rule that is one of [`CACHES`] is mounted in the view as
//! an overlay: the human's cache is the lower layer, read as it is; what a
//! tool writes (a new crate, an edited `build.rs`, a poisoned wheel) goes to
//! an upper layer in the server's own state, which the human's programs
//! never read, and which goes when the server stops.

use std::path::{Path, PathBuf};

use crate::policy::PathContext;

/// The package and build caches the built-in policy grants writable (and
/// a few more a policy may add), in policy path syntax.
pub(crate) const CACHES: &[&str] = &[
    "~/.cargo/registry",
    "~/.cargo/git",
    "{CARGO_HOME}/registry",
    "{CARGO_HOME}/git",
    "{XDG_CACHE_HOME}/pip",
    "{XDG_CACHE_HOME}/uv",
    "{UV_CACHE_DIR}",
    "{PIP_CACHE_DIR}",
    "~/.npm",
    "{npm_config_cache}",
    "{XDG_CACHE_HOME}/yarn",
    "~/.yarn/berry",
    "{XDG_DATA_HOME}/pnpm",
    "{XDG_CACHE_HOME}/pnpm",
    "{XDG_CACHE_HOME}/go-build",
    "{GOCACHE}",
    "~/go/pkg/mod",
    "{GOMODCACHE}",
    "{XDG_CACHE_HOME}/ccache",
    "{CCACHE_DIR}",
    "~/.m2/repository",
    "~/.gradle/caches",
];

/// The caches of `CACHES` as they expand in `ctx`, canonical (those that
/// exist).
pub fn expanded(ctx: &PathContext) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = CACHES
        .iter()
        .filter_map(|raw| ctx.expand(raw).ok())
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Where the upper layer of the cache at `path` lives under `layers` (the
/// server's layer directory): one directory per cache, named by the cache's
/// path with `/` as `%` (unique, readable in a listing).
pub(crate) fn layer_of(layers: &Path, path: &Path) -> PathBuf {
    let name: String = path
        .to_string_lossy()
        .trim_start_matches('/')
        .chars()
        .map(|c| if c == '/' { '%' } else { c })
        .collect();
    layers.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cache_has_its_own_layer() {
        let l = Path::new("/state/layers");
        assert_eq!(
            layer_of(l, Path::new("/home/u/.cargo/registry")),
            PathBuf::from("/state/layers/home%u%.cargo%registry")
        );
    }
}
