//! The MCP bridge (issue 19): an MCP server, built on the official Rust SDK
//! `rmcp`, that is a toolsrv client underneath. `tools/list` is the agent's
//! loaded tools, `tools/call` a `proc/new` request; `notifications/cancelled`
//! clunks it; `_meta {"toolsrv/bypass": true}` goes through the bypass
//! broker. Transports: stdio ([`serve_stdio`]) and Streamable HTTP
//! ([`serve_http`]) behind a bearer token. See docs/mcp.md.

#![forbid(unsafe_code)]

mod announce;
mod args;
mod bridge;
mod call;
mod error;
mod handler;
mod http;
mod oversize;
mod progress;
mod slots;
mod token;

pub use announce::announce;
pub use bridge::{Bridge, BridgeConfig};
pub use call::BYPASS_META;
pub use error::{ArgError, BridgeError};
pub use http::{serve_http, HttpListen, Listener, ENDPOINT, MAX_HTTP_BODY};
pub use oversize::{Guard, MAX_MESSAGE};
pub use token::{generate_token, write_token_file};

use rmcp::ServiceExt;

/// Serves one MCP session on stdin/stdout until the client closes it (pipes
/// are driven by the reactor, not the blocking pool: no thread hop per
/// message). Calls
/// still running then are cancelled (their fids clunked). A message over
/// [`MAX_MESSAGE`] bytes is answered with an error ([`Guard`]).
pub async fn serve_stdio(bridge: Bridge) -> Result<(), BridgeError> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let running = bridge
        .serve((Guard::new(stdin), stdout))
        .await
        .map_err(|e| BridgeError::Mcp(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| BridgeError::Mcp(e.to_string()))?;
    Ok(())
}
