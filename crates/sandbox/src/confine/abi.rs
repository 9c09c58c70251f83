//! Kernel Landlock ABI detection and the features that need a given ABI.

/// Returns the Landlock ABI version of the running kernel, or 0 when Landlock is not
/// built in or not enabled at boot.
pub fn landlock_abi() -> i32 {
    match super::sys::landlock_abi_version() {
        Ok(v) => i32::try_from(v).unwrap_or(i32::MAX),
        Err(_) => 0,
    }
}

/// A Landlock feature the confinement may need, with the ABI that introduced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feature {
    /// Filesystem access control at all (ABI 1).
    Filesystem,
    /// Linking and renaming across directories (`Refer`, ABI 2).
    Refer,
    /// `truncate(2)` and `O_TRUNC` control (ABI 3).
    Truncate,
    /// TCP bind/connect port rules (ABI 4).
    TcpPorts,
    /// `ioctl(2)` on device files (ABI 5).
    IoctlDev,
    /// Signal and abstract Unix socket scoping (ABI 6).
    Scoping,
}

impl Feature {
    /// The first Landlock ABI that supports this feature.
    pub(crate) fn abi(self) -> i32 {
        match self {
            Feature::Filesystem => 1,
            Feature::Refer => 2,
            Feature::Truncate => 3,
            Feature::TcpPorts => 4,
            Feature::IoctlDev => 5,
            Feature::Scoping => 6,
        }
    }

    /// A human-readable name, used in errors and in the unenforced list.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Feature::Filesystem => "filesystem access control",
            Feature::Refer => "link and rename control",
            Feature::Truncate => "truncate control",
            Feature::TcpPorts => "tcp port rules",
            Feature::IoctlDev => "device ioctl control",
            Feature::Scoping => "signal and abstract unix socket scoping",
        }
    }

    /// Whether a missing feature makes `best_effort: false` refuse. Scoping is
    /// documented as "where the kernel supports it", so it never refuses.
    pub(crate) fn mandatory(self) -> bool {
        !matches!(self, Feature::Scoping)
    }
}
