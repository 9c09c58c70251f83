//! The host a catalog resolves variants for, named the way Go names it.

use std::env::consts;

/// An operating system and CPU architecture pair using Go's `GOOS`/`GOARCH`
/// names (`linux`, `darwin`, ... / `amd64`, `arm64`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Host {
    /// Go's `GOOS` name, e.g. `linux` or `darwin`.
    pub platform: String,
    /// Go's `GOARCH` name, e.g. `amd64` or `arm64`.
    pub arch: String,
}

impl Host {
    /// A host with explicit names (for tests and cross-host evaluation).
    pub fn new(platform: impl Into<String>, arch: impl Into<String>) -> Host {
        Host {
            platform: platform.into(),
            arch: arch.into(),
        }
    }

    /// The host this process runs on, mapped from `std::env::consts` to Go's
    /// names.
    pub fn current() -> Host {
        Host::new(go_os(consts::OS), go_arch(consts::ARCH))
    }

    /// Whether a variant's optional `platform`/`arch` keys match this host
    /// (an omitted key matches anything; names compare case-insensitively).
    pub fn matches(&self, platform: Option<&str>, arch: Option<&str>) -> bool {
        platform.is_none_or(|p| p.eq_ignore_ascii_case(&self.platform))
            && arch.is_none_or(|a| a.eq_ignore_ascii_case(&self.arch))
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.platform, self.arch)
    }
}

/// Go's `GOOS` for an operating system named the way Rust's `target_os`
/// (`linux`, `macos`) or `uname -s` (`Linux`, `Darwin`) names it.
pub fn go_os(os: &str) -> String {
    match os.to_ascii_lowercase().as_str() {
        "macos" | "darwin" => "darwin".to_string(),
        other => other.to_string(),
    }
}

/// Go's `GOARCH` for a CPU named the way Rust's `target_arch` (`x86_64`,
/// `aarch64`) or `uname -m` (`x86_64`, `aarch64`, `i686`, `armv7l`) names it.
/// Where Go distinguishes endianness and the name does not, the compile-time
/// endianness decides.
pub fn go_arch(arch: &str) -> String {
    let little = cfg!(target_endian = "little");
    match arch {
        "x86_64" | "amd64" => "amd64",
        "x86" | "i386" | "i486" | "i586" | "i686" => "386",
        "aarch64" | "arm64" => "arm64",
        "arm" => "arm",
        m if m.starts_with("armv") => "arm",
        "loongarch64" => "loong64",
        "mips" if little => "mipsle",
        "mips" => "mips",
        "mips64" if little => "mips64le",
        "mips64" => "mips64",
        "powerpc64" if little => "ppc64le",
        "powerpc64" => "ppc64",
        "powerpc" => "ppc",
        "riscv64" => "riscv64",
        "s390x" => "s390x",
        "sparc64" => "sparc64",
        "wasm32" => "wasm",
        other => other,
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_uses_go_names() {
        let h = Host::current();
        assert_ne!(h.platform, "macos");
        assert_ne!(h.arch, "x86_64");
        assert_ne!(h.arch, "aarch64");
        assert!(!h.platform.is_empty() && !h.arch.is_empty());
    }

    #[test]
    fn maps_names() {
        assert_eq!(go_os("macos"), "darwin");
        assert_eq!(go_os("linux"), "linux");
        assert_eq!(go_arch("x86_64"), "amd64");
        assert_eq!(go_arch("x86"), "386");
        assert_eq!(go_arch("aarch64"), "arm64");
        assert_eq!(go_arch("loongarch64"), "loong64");
        assert_eq!(go_arch("riscv64"), "riscv64");
    }

    #[test]
    fn matching() {
        let h = Host::new("linux", "amd64");
        assert!(h.matches(None, None));
        assert!(h.matches(Some("linux"), None));
        assert!(h.matches(None, Some("amd64")));
        assert!(!h.matches(Some("darwin"), None));
        assert!(!h.matches(Some("linux"), Some("arm64")));
        assert_eq!(h.to_string(), "linux/amd64");
    }
}
