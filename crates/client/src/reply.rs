//! Checking reply bodies: `Rerror` becomes [`ClientError::Server`], an
//! unexpected type a [`ClientError::Protocol`].

use toolsrv_wire::{Body, Qid, Stat};

use crate::error::ClientError;

fn unexpected(expected: &str, got: &Body) -> ClientError {
    match got {
        Body::Rerror { ename } => ClientError::Server(ename.clone()),
        other => ClientError::Protocol(format!(
            "expected {expected}, got message type {}",
            other.type_id()
        )),
    }
}

/// `Rread` → its data.
pub(crate) fn read(body: Body) -> Result<Vec<u8>, ClientError> {
    match body {
        Body::Rread { data } => Ok(data),
        other => Err(unexpected("Rread", &other)),
    }
}

/// `Rwrite` → its count, which must not exceed the `sent` bytes.
pub(crate) fn write(body: Body, sent: usize) -> Result<u32, ClientError> {
    match body {
        Body::Rwrite { count } if count as usize <= sent => Ok(count),
        Body::Rwrite { count } => Err(ClientError::Protocol(format!(
            "server claims to have written {count} bytes of {sent}"
        ))),
        other => Err(unexpected("Rwrite", &other)),
    }
}

/// `Rclunk`.
pub(crate) fn clunk(body: Body) -> Result<(), ClientError> {
    match body {
        Body::Rclunk => Ok(()),
        other => Err(unexpected("Rclunk", &other)),
    }
}

/// `Ropen` → qid and iounit.
pub(crate) fn open(body: Body) -> Result<(Qid, u32), ClientError> {
    match body {
        Body::Ropen { qid, iounit } => Ok((qid, iounit)),
        other => Err(unexpected("Ropen", &other)),
    }
}

/// `Rwalk` that walked all `expected` names of `path`.
pub(crate) fn walk(body: Body, expected: usize, path: &str) -> Result<(), ClientError> {
    match body {
        Body::Rwalk { wqids } if wqids.len() == expected => Ok(()),
        Body::Rwalk { .. } => Err(ClientError::Server(format!("file not found: {path}"))),
        other => Err(unexpected("Rwalk", &other)),
    }
}

/// `Rstat` → the stat entry.
pub(crate) fn stat(body: Body) -> Result<Stat, ClientError> {
    match body {
        Body::Rstat { stat } => Ok(stat),
        other => Err(unexpected("Rstat", &other)),
    }
}

/// `Rattach`.
pub(crate) fn attach(body: Body) -> Result<Qid, ClientError> {
    match body {
        Body::Rattach { qid } => Ok(qid),
        other => Err(unexpected("Rattach", &other)),
    }
}

/// `Rauth`.
pub(crate) fn auth(body: Body) -> Result<Qid, ClientError> {
    match body {
        Body::Rauth { aqid } => Ok(aqid),
        other => Err(unexpected("Rauth", &other)),
    }
}
