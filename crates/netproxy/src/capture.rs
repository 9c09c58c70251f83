//! A connection captured in a run's network namespace: a tool that ignores
//! the proxy variables dialled an address itself, and the namespace's one
//! route brought it to the server's listener on that port. Its local
//! address is where the tool meant to go. An address the DNS stub gave out
//! for a listed name goes to that name, checked like a proxy request; any
//! other address is refused (closed) and recorded.

use std::sync::Arc;

use tokio::net::TcpStream;

use crate::decide::{Refusal, Target};
use crate::denial::Denial;
use crate::gate::Gate;

/// Relays one captured connection, or closes it.
pub(crate) async fn captured(conn: TcpStream, gate: Arc<Gate>) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let dest = conn.local_addr()?;
    let ip = dest.ip().to_canonical();
    let Some(name) = gate.names.name(ip) else {
        let target = Target {
            host: ip.to_string(),
            port: dest.port(),
        };
        let refusal = Refusal::Literal {
            target: target.clone(),
        };
        gate.denials.push(Denial::of(&refusal, target.to_string()));
        return Ok(());
    };
    let target = Target {
        host: name,
        port: dest.port(),
    };
    let Ok(up) = gate.connect(&target).await else {
        return Ok(());
    };
    crate::intercept::tunnel(conn, Vec::new(), up, target, gate).await
}
