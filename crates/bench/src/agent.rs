//! Client-side helpers shared by the benches that run tools: connecting as
//! an agent with its tools loaded, and calls that must succeed.

use anyhow::{ensure, Context, Result};
use toolsrv_client::{Auth, CallRequest, Client};

use crate::server::{ServerProcess, SECRET};

/// A connection for one agent, with `tools` loaded for it (none when empty).
pub async fn connect(
    srv: &ServerProcess,
    auth: bool,
    agent: &str,
    tools: &[&str],
) -> Result<Client> {
    let client = connect_client(srv, auth)
        .await
        .with_context(|| format!("agent {agent} cannot connect"))?;
    if !tools.is_empty() {
        client
            .load(agent, tools)
            .await
            .with_context(|| format!("cannot load {tools:?} for agent {agent}"))?;
    }
    Ok(client)
}

/// A client of `srv`, authenticated with [`SECRET`] when `auth`.
pub async fn connect_client(srv: &ServerProcess, auth: bool) -> Result<Client> {
    let how = if auth {
        Auth::Secret(SECRET.into())
    } else {
        Auth::None
    };
    Client::connect(srv.socket(), how)
        .await
        .with_context(|| format!("cannot connect to {}", srv.socket().display()))
}

/// Run `req` and fail unless the result is a success.
pub async fn call_ok(client: &Client, req: &CallRequest) -> Result<()> {
    let r = client
        .call(req)
        .await
        .with_context(|| format!("calling {} as {}", req.tool, req.agent))?;
    ensure!(
        !r.is_error,
        "{} as {} returned an error result: {:?}",
        req.tool,
        req.agent,
        r.content
    );
    Ok(())
}
