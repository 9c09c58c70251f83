//! The messages between the server and the reader, one per `SOCK_SEQPACKET`
//! packet: a type byte, a flags byte, six bytes of padding (so the events
//! that follow are 8-aligned), then the body.

/// Bytes before a message's body.
pub(crate) const HEAD: usize = 8;

/// Server to reader: the fanotify group, passed with `SCM_RIGHTS`. Flag
/// [`FLAG_UNKNOWN`]: the events already queued are of unknown origin (a new
/// reader after the death of the last one).
pub(crate) const TO_READER_GROUP: u8 = 1;
/// Server to reader: read everything queued now, forward it, then answer
/// [`FROM_READER_FLUSHED`] with the same 8-byte sequence number.
pub(crate) const TO_READER_FLUSH: u8 = 2;
/// Server to reader: forward events of processes outside the namespace too
/// (flag 1) or not (flag 0).
pub(crate) const TO_READER_OTHERS: u8 = 3;

/// Reader to server: the reader is set up (sent once, first).
pub(crate) const FROM_READER_READY: u8 = 1;
/// Reader to server: events, as `read(2)` of the group returned them (pids
/// as the namespace sees them). Flag [`FLAG_UNKNOWN`]: their origin is unknown.
pub(crate) const FROM_READER_EVENTS: u8 = 2;
/// Reader to server: the answer to [`TO_READER_FLUSH`].
pub(crate) const FROM_READER_FLUSHED: u8 = 3;

/// See [`TO_READER_GROUP`] and [`FROM_READER_EVENTS`].
pub(crate) const FLAG_UNKNOWN: u8 = 1;

/// Room for the events of one message.
pub(crate) const EVENTS_MAX: usize = 64 * 1024;

/// A message with an 8-byte sequence number as its body.
pub(crate) fn with_seq(kind: u8, seq: u64) -> [u8; HEAD + 8] {
    let mut m = [0u8; HEAD + 8];
    m[0] = kind;
    m[HEAD..].copy_from_slice(&seq.to_ne_bytes());
    m
}

/// The sequence number of a message made by [`with_seq`], if it has one.
pub(crate) fn seq_of(msg: &[u8]) -> Option<u64> {
    let b: [u8; 8] = msg.get(HEAD..HEAD + 8)?.try_into().ok()?;
    Some(u64::from_ne_bytes(b))
}
