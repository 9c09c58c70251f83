//! `toolsrv doctor`: what this host enforces of a policy and, with
//! `--socket`, what the running server reports about itself (its `doctor`
//! file); what is missing and what to change (docs/cli.md, docs/cli.md).
//!
//! Exit status: 0 when everything the policy asks for is enforced (judged as
//! `general.best_effort: false` would), 1 otherwise or when the policy or the
//! server cannot be read. With `--socket` the server's report decides.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use toolsrv_sandbox::PolicyStore;
use toolsrv_sandbox::{Facts, Report};

use crate::cli::Global;
use crate::output::{for_terminal, outln};

/// Runs `toolsrv doctor`.
pub fn main(global: &Global, sandbox: Option<PathBuf>) -> ExitCode {
    match run(global, sandbox) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) if crate::output::is_stdout_closed(&e) => ExitCode::from(1),
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "toolsrv doctor: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Prints the reports; whether everything is enforced.
fn run(global: &Global, sandbox: Option<PathBuf>) -> Result<bool> {
    let (policy, path, broken) = policy(sandbox)?;
    // Probed before any thread exists (the namespace probes fork).
    let facts = Facts::host(&toolsrv_sandbox::Forces::from_env());
    let mut host = Report::evaluate(&facts, &policy.current(), path.as_deref());
    if let Some(why) = &broken {
        // What a server started now would do: refuse to start.
        host.missing.push(toolsrv_sandbox::Missing {
            what: format!(
                "the policy file does not parse: {why}; a server started with it refuses to start, and one running keeps the version it loaded (its report below, with --socket, says when)"
            ),
            required: true,
            fix: "fix the file".to_string(),
        });
        host.enforced = false;
    }
    let server = if crate::connect::socket_path(global).is_ok() {
        Some(server_report(global)?)
    } else {
        None
    };
    let enforced = server.as_ref().unwrap_or(&host).enforced && broken.is_none();
    if global.json {
        // Both reports and the verdict (docs/cli.md).
        let both = serde_json::json!({
            "host": host,
            "server": server,
            "enforced": enforced,
        });
        outln!("{}", serde_json::to_string_pretty(&both)?)?;
    } else {
        print_report(&host, "this host")?;
        if let Some(s) = &server {
            outln!("")?;
            print_report(s, "the server")?;
        }
        outln!("")?;
        let reachable = !server.as_ref().unwrap_or(&host).reachable.is_empty();
        if enforced && reachable {
            outln!("everything the policy asks for is enforced, but tools can still reach what no rule grants (see \"reachable\" above)")?;
        } else if enforced {
            outln!("everything the policy asks for is enforced")?;
        } else {
            outln!("NOT everything the policy asks for is enforced (see \"missing\" above)")?;
        }
    }
    Ok(enforced)
}

/// `--sandbox P`, else the default policy file when it exists, else the
/// built-in policy; with its path for the report, and, when the file does
/// not parse, why (the built-in policy is judged then, so the rest of the
/// report still says what this host offers).
fn policy(sandbox: Option<PathBuf>) -> Result<(PolicyStore, Option<String>, Option<String>)> {
    let path = match sandbox {
        Some(p) => {
            let p = crate::paths::expand_tilde(&p);
            anyhow::ensure!(p.is_file(), "--sandbox {}: no such file", p.display());
            Some(p)
        }
        None => Some(crate::paths::config_dir().join("sandbox.yaml")).filter(|p| p.is_file()),
    };
    match path {
        Some(p) => match PolicyStore::open(&p) {
            Ok(store) => Ok((store, Some(p.display().to_string()), None)),
            Err(e @ toolsrv_sandbox::PolicyError::Io { .. }) => {
                Err(e).with_context(|| format!("policy {}", p.display()))
            }
            Err(e) => Ok((
                PolicyStore::embedded_default(),
                Some(p.display().to_string()),
                Some(e.to_string()),
            )),
        },
        None => Ok((PolicyStore::embedded_default(), None, None)),
    }
}

/// The running server's `doctor` file.
fn server_report(global: &Global) -> Result<Report> {
    let read = async {
        let client = crate::connect::connect(global).await?;
        let data = client
            .read_file("doctor")
            .await
            .context("cannot read the server's doctor file")?;
        serde_json::from_slice::<Report>(&data).context("the server's doctor file is not a report")
    };
    crate::runtime::block_on(read)
        .unwrap_or_else(|| Err(anyhow::anyhow!("cannot start the async runtime")))
}

/// The human-readable form of one report.
fn print_report(r: &Report, whose: &str) -> Result<()> {
    let t = |s: &str| for_terminal(s).into_owned();
    let policy = match &r.policy.path {
        Some(p) => t(p),
        None => "the built-in policy".to_string(),
    };
    outln!(
        "{whose} ({}), policy {policy} (best_effort: {}):",
        match r.source {
            toolsrv_sandbox::Source::Host => "probed now",
            toolsrv_sandbox::Source::Server => "as the server reports it",
        },
        r.policy.best_effort
    )?;
    let l = &r.landlock;
    let features: Vec<&str> = [
        (l.filesystem, "filesystem"),
        (l.refer, "link/rename"),
        (l.truncate, "truncate"),
        (l.tcp_ports, "TCP ports"),
        (l.ioctl_dev, "device ioctl"),
        (l.scoping, "scoping"),
        (l.audit, "audit"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    if l.abi == 0 {
        outln!("  landlock      not enabled")?;
    } else {
        outln!("  landlock      ABI {}: {}", l.abi, features.join(", "))?;
    }
    outln!(
        "  seccomp       {} ({})",
        if r.seccomp.available {
            "available"
        } else {
            "NOT available"
        },
        t(&r.seccomp.detail)
    )?;
    let c = &r.containment;
    let limit = |v: &Option<String>| v.as_deref().map_or("not enforced".to_string(), t);
    outln!("  containment   {}: {}", t(&c.mechanism), t(&c.grouping))?;
    outln!(
        "                processes: {}; memory: {}; cpu: {}; file_size: {}; open_files: {}",
        limit(&c.processes),
        limit(&c.memory),
        t(&c.cpu),
        t(&c.file_size),
        t(&c.open_files)
    )?;
    let i = &r.identity;
    match &i.reason {
        Some(why) => outln!(
            "  identity      {} (uid {}, gid {}): {}",
            t(&i.mode),
            i.uid,
            i.gid,
            t(why)
        )?,
        None => outln!(
            "  identity      {} (uid {}, gid {})",
            t(&i.mode),
            i.uid,
            i.gid
        )?,
    }
    if let Some(tools) = &i.tools {
        outln!(
            "                confined tools: uid {} and gid {} on the host (tool ids 0..{} mapped from {}); id-mapped mounts on the workspace: {}",
            tools.host_uid,
            tools.host_gid,
            tools.count.saturating_sub(1),
            tools.host_uid,
            if tools.workspace_id_maps.available {
                "yes".to_string()
            } else {
                format!("no ({})", t(&tools.workspace_id_maps.detail))
            }
        )?;
    }
    outln!(
        "  filesystem    {}: {}",
        t(&r.filesystem.mechanism),
        t(&r.filesystem.detail)
    )?;
    let n = &r.network;
    if !n.policy.is_empty() {
        outln!("  network       {}", t(&n.policy))?;
    }
    outln!(
        "  {}{}; network.enabled: false {}; domains: {}",
        if n.policy.is_empty() {
            "network       "
        } else {
            "              "
        },
        t(&n.mechanism),
        if n.no_network {
            "enforced (seccomp)"
        } else {
            "NOT enforced"
        },
        t(&n.domains)
    )?;
    outln!(
        "  denials       {}: {}",
        if r.denials.observable {
            "observable"
        } else {
            "not observable"
        },
        t(&r.denials.detail)
    )?;
    outln!(
        "  attribution   {}: {}",
        t(&r.attribution.mechanism),
        t(&r.attribution.detail)
    )?;
    if r.missing.is_empty() {
        outln!("  missing       nothing")?;
    }
    for m in &r.missing {
        outln!(
            "  missing       {}{}",
            t(&m.what),
            if m.required {
                ""
            } else {
                " (not required by the policy)"
            }
        )?;
        outln!("      fix: {}", t(&m.fix))?;
    }
    for r in &r.reachable {
        outln!("  reachable     {}: {}", t(&r.what), t(&r.detail))?;
        outln!("      fix: {}", t(&r.fix))?;
    }
    Ok(())
}
