//! A connection captured in a run's network namespace: a tool that ignores
//! the proxy variables dialled an address itself, and the namespace's one
//! route brought it to the server's listener on that port. Its local
//! address is where the tool meant to go. An address the DNS stub gave out
//! for a listed name goes to that name, checked like a proxy request; any
//! other address only where an address or range line allows it, else the
//! connection is closed and the refusal recorded.

use std::sync::Arc;

use tokio::net::TcpStream;

use crate::decide::Target;
use crate::gate::Gate;

/// Relays one captured connection, or closes it.
pub(crate) async fn captured(conn: TcpStream, gate: Arc<Gate>) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let dest = conn.local_addr()?;
    let ip = dest.ip().to_canonical();
    // A stand-in address goes to its name; any other address is checked
    // as a literal (an address or range line may allow it).
    let host = gate.names.name(ip).unwrap_or_else(|| ip.to_string());
    let target = Target {
        host,
        port: dest.port(),
    };
    let Ok(up) = gate.connect(&target).await else {
        return Ok(());
    };
    crate::intercept::tunnel(conn, Vec::new(), up, target, gate).await
}
