//! Control and discovery files: `ctl`, `tools`, `all`, `info`, `tools_rev`.

use toolsrv_vfs::Error;

use crate::files::Generated;

/// Go's GOOS name of this host.
pub fn go_platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

/// Go's GOARCH name of this host.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// `info`: `{"platform": GOOS, "arch": GOARCH}`.
pub fn info_file() -> Generated<impl Fn() -> Result<Vec<u8>, Error> + Send + Sync> {
    let body = serde_json::json!({"platform": go_platform(), "arch": go_arch()}).to_string();
    Generated(move || Ok(body.clone().into_bytes()))
}
