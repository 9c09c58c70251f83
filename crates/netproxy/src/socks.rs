//! A SOCKS5 `CONNECT` (RFC 1928), with user name and password (RFC 1929)
//! where the proxy takes credentials: the one command
//! git, curl and language runtimes use through `ALL_PROXY=socks5h://`. A
//! name is resolved by the proxy (`socks5h`); an address is refused like a
//! literal in HTTP.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::decide::{Refusal, Target};
use std::sync::Arc;

use crate::door::Door;
use crate::gate::Gate;

/// SOCKS replies: succeeded, general failure, not allowed by ruleset,
/// host unreachable, command not supported, address type not supported.
const OK: u8 = 0;
const NOT_ALLOWED: u8 = 2;
const UNREACHABLE: u8 = 4;
const NO_COMMAND: u8 = 7;
const NO_ATYP: u8 = 8;

/// Methods: none, user name and password (RFC 1929), none acceptable.
const NO_AUTH: u8 = 0;
const USER_PASSWORD: u8 = 2;
const NO_METHOD: u8 = 0xff;

/// The user name and password negotiation: the gate they open (the
/// client was told either way; a failure closes the connection).
async fn user_password(conn: &mut TcpStream, door: &Door) -> std::io::Result<Option<Arc<Gate>>> {
    let mut ver_len = [0u8; 2];
    conn.read_exact(&mut ver_len).await?;
    let mut user = vec![0u8; usize::from(ver_len[1])];
    conn.read_exact(&mut user).await?;
    let mut len = [0u8; 1];
    conn.read_exact(&mut len).await?;
    let mut password = vec![0u8; usize::from(len[0])];
    conn.read_exact(&mut password).await?;
    let gate = (ver_len[0] == 1)
        .then(|| door.admit(&user, &password))
        .flatten();
    conn.write_all(&[1, if gate.is_some() { 0 } else { 1 }])
        .await?;
    Ok(gate)
}

pub(crate) async fn handle(mut conn: TcpStream, door: &Door) -> std::io::Result<()> {
    let Ok(asked) = tokio::time::timeout(door.head_timeout(), request(&mut conn, door)).await
    else {
        return Ok(());
    };
    let Some((gate, target)) = asked? else {
        return Ok(());
    };
    let up = match gate.connect(&target).await {
        Ok(u) => u,
        Err(Refusal::NoAddress { .. }) => return reply(&mut conn, UNREACHABLE).await,
        Err(_) => return reply(&mut conn, NOT_ALLOWED).await,
    };
    reply(&mut conn, OK).await?;
    let up = up;
    crate::intercept::tunnel(conn, Vec::new(), up, target, gate).await
}

/// The greeting, the login and the request: the gate that admitted the
/// client and the target of its `CONNECT`, or `None` once the refusal of
/// anything else was sent.
async fn request(
    conn: &mut TcpStream,
    door: &Door,
) -> std::io::Result<Option<(Arc<Gate>, Target)>> {
    let mut head = [0u8; 2];
    conn.read_exact(&mut head).await?;
    let mut methods = vec![0u8; usize::from(head[1])];
    conn.read_exact(&mut methods).await?;
    let gate = match door.open() {
        Some(g) if methods.contains(&NO_AUTH) => {
            conn.write_all(&[5, NO_AUTH]).await?;
            g
        }
        None if methods.contains(&USER_PASSWORD) => {
            conn.write_all(&[5, USER_PASSWORD]).await?;
            match user_password(conn, door).await? {
                Some(g) => g,
                None => return Ok(None),
            }
        }
        _ => {
            conn.write_all(&[5, NO_METHOD]).await?;
            return Ok(None);
        }
    };
    let mut req = [0u8; 4];
    conn.read_exact(&mut req).await?;
    let (cmd, atyp) = (req[1], req[3]);
    let host = match atyp {
        3 => {
            let mut len = [0u8; 1];
            conn.read_exact(&mut len).await?;
            let mut name = vec![0u8; usize::from(len[0])];
            conn.read_exact(&mut name).await?;
            String::from_utf8_lossy(&name).into_owned()
        }
        1 => {
            let mut a = [0u8; 4];
            conn.read_exact(&mut a).await?;
            std::net::Ipv4Addr::from(a).to_string()
        }
        4 => {
            let mut a = [0u8; 16];
            conn.read_exact(&mut a).await?;
            std::net::Ipv6Addr::from(a).to_string()
        }
        _ => return reply(conn, NO_ATYP).await.map(|()| None),
    };
    let mut port = [0u8; 2];
    conn.read_exact(&mut port).await?;
    if cmd != 1 {
        return reply(conn, NO_COMMAND).await.map(|()| None);
    }
    Ok(Some((
        gate,
        Target {
            host,
            port: u16::from_be_bytes(port),
        },
    )))
}

/// A reply with `code` and an empty bound address.
async fn reply(conn: &mut TcpStream, code: u8) -> std::io::Result<()> {
    conn.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]).await
}
