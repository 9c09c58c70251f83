//! A process's output under the safety limit: the first and last halves are
//! kept, the middle dropped and counted, so memory stays bounded whatever a
//! tool prints. Readers follow it live through per-reader cursors.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use toolsrv_base::LockUnpoisoned;

use tokio::sync::{watch, Notify};

/// A follower that has not read for this long no longer holds the tool back.
const FOLLOWER_STALL: Duration = Duration::from_secs(2);

/// A live reader of the output, by id: its stream position and last read.
#[derive(Debug, Clone, Copy)]
struct Follower {
    pos: u64,
    seen: Instant,
}

/// The marker that stands where bytes were dropped.
pub(crate) fn omitted_marker(n: u64) -> String {
    format!("\n[toolsrv: {n} bytes omitted]\n")
}

struct Buf {
    head: Vec<u8>,
    head_cap: usize,
    tail: VecDeque<u8>,
    tail_cap: usize,
    /// Every byte ever written.
    total: u64,
}

impl Buf {
    /// Stream position of `tail[0]`.
    fn tail_start(&self) -> u64 {
        self.total - self.tail.len() as u64
    }
}

/// Output of one process.
pub(crate) struct Output {
    buf: Mutex<Buf>,
    /// (bytes written so far, finished): readers wait on changes.
    progress: watch::Sender<(u64, bool)>,
    /// Readers following the output live; the tool is paced so that they lose
    /// nothing while they keep reading.
    followers: Mutex<HashMap<u64, Follower>>,
    next_follower: AtomicU64,
    /// Signalled when a follower read (or left).
    followed: Notify,
}

/// Where one reader is: the offset it asked for last (in what it was shown) and
/// the matching position in the stream (they differ once a marker was shown).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Cursor {
    shown: u64,
    stream: u64,
}

impl Output {
    /// An empty output holding at most `limit` bytes.
    pub(crate) fn new(limit: u64) -> Output {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX).max(2);
        let head_cap = limit / 2;
        Output {
            buf: Mutex::new(Buf {
                head: Vec::new(),
                head_cap,
                tail: VecDeque::new(),
                tail_cap: limit - head_cap,
                total: 0,
            }),
            progress: watch::channel((0, false)).0,
            followers: Mutex::new(HashMap::new()),
            next_follower: AtomicU64::new(1),
            followed: Notify::new(),
        }
    }

    /// Register a live reader; the tool is paced while it keeps reading.
    pub(crate) fn follow(&self) -> u64 {
        let id = self.next_follower.fetch_add(1, Ordering::Relaxed);
        self.followers.lock_unpoisoned().insert(
            id,
            Follower {
                pos: 0,
                seen: Instant::now(),
            },
        );
        id
    }

    /// The reader `id` is gone.
    pub(crate) fn unfollow(&self, id: u64) {
        self.followers.lock_unpoisoned().remove(&id);
        self.followed.notify_waiters();
    }

    fn advance(&self, id: u64, pos: u64) {
        if let Some(f) = self.followers.lock_unpoisoned().get_mut(&id) {
            f.pos = pos;
            f.seen = Instant::now();
        }
        self.followed.notify_waiters();
    }

    /// Whether appending `n` bytes now would drop bytes a live follower has not read.
    fn would_outrun(&self, n: usize) -> bool {
        let (tail_start_after, head_cap) = {
            let b = self.buf.lock_unpoisoned();
            let total = b.total + n as u64;
            (total.saturating_sub(b.tail_cap as u64), b.head_cap as u64)
        };
        let now = Instant::now();
        self.followers.lock_unpoisoned().values().any(|f| {
            now.duration_since(f.seen) < FOLLOWER_STALL && tail_start_after > f.pos.max(head_cap)
        })
    }

    /// Append bytes, first waiting (a bounded time) while a live follower would
    /// otherwise lose some: a follower that keeps reading gets every byte, and one
    /// that stalls stops holding the tool back after a while.
    pub(crate) async fn push_paced(&self, data: &[u8]) {
        while self.would_outrun(data.len()) {
            let notified = self.followed.notified();
            if !self.would_outrun(data.len()) {
                break;
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), notified).await;
        }
        self.push(data);
    }

    /// Append bytes the tool wrote.
    pub(crate) fn push(&self, mut data: &[u8]) {
        let total = {
            let mut b = self.buf.lock_unpoisoned();
            b.total += data.len() as u64;
            let room = b.head_cap - b.head.len();
            if room > 0 {
                let n = room.min(data.len());
                b.head.extend_from_slice(&data[..n]);
                data = &data[n..];
            }
            if data.len() >= b.tail_cap {
                data = &data[data.len() - b.tail_cap..];
                b.tail.clear();
            }
            let overflow = (b.tail.len() + data.len()).saturating_sub(b.tail_cap);
            b.tail.drain(..overflow);
            b.tail.extend(data);
            b.total
        };
        self.progress.send_modify(|p| p.0 = total);
    }

    /// No more bytes will come: what is retained is trimmed to its size.
    pub(crate) fn finish(&self) {
        {
            let mut b = self.buf.lock_unpoisoned();
            b.head.shrink_to_fit();
            b.tail.shrink_to_fit();
        }
        self.progress.send_modify(|p| p.1 = true);
    }

    /// The bytes retained now (the first and last parts kept).
    pub(crate) fn retained(&self) -> u64 {
        let b = self.buf.lock_unpoisoned();
        (b.head.len() + b.tail.len()) as u64
    }

    /// The whole retained output, with the marker where bytes were dropped.
    pub(crate) fn snapshot(&self) -> Vec<u8> {
        let b = self.buf.lock_unpoisoned();
        let omitted = b.tail_start() - b.head.len() as u64;
        let mut out = Vec::with_capacity(b.head.len() + b.tail.len() + 40);
        out.extend_from_slice(&b.head);
        if omitted > 0 {
            out.extend_from_slice(omitted_marker(omitted).as_bytes());
        }
        let (a, c) = b.tail.as_slices();
        out.extend_from_slice(a);
        out.extend_from_slice(c);
        out
    }

    /// Bytes from `cursor` on (at most `count`), without waiting. A reader whose
    /// position was dropped gets the marker (with the count it missed) first.
    fn take(&self, cursor: &mut Cursor, count: usize) -> Vec<u8> {
        let b = self.buf.lock_unpoisoned();
        let pos = cursor.stream;
        let out = if pos < b.head.len() as u64 {
            let start = pos as usize;
            let end = (start + count).min(b.head.len());
            cursor.stream = end as u64;
            b.head[start..end].to_vec()
        } else if pos < b.tail_start() {
            let skipped = b.tail_start() - pos;
            cursor.stream = b.tail_start();
            let mut m = omitted_marker(skipped).into_bytes();
            m.truncate(count);
            m
        } else {
            let start = (pos - b.tail_start()) as usize;
            let end = (start + count).min(b.tail.len());
            cursor.stream += (end - start) as u64;
            copy_range(&b.tail, start, end)
        };
        cursor.shown += out.len() as u64;
        out
    }

    /// [`Output::read`] for the registered follower `id`.
    pub(crate) async fn read_following(
        &self,
        id: u64,
        cursor: &mut Cursor,
        offset: u64,
        count: u32,
    ) -> Vec<u8> {
        // Mark this follower as reading (not stalled) while it waits.
        self.advance(id, cursor.stream);
        let data = self.read(cursor, offset, count).await;
        self.advance(id, cursor.stream);
        data
    }

    /// Read at `offset` for a reader at `cursor`: returns new bytes, waiting while
    /// the process runs and nothing new has come; empty once it ended.
    pub(crate) async fn read(&self, cursor: &mut Cursor, offset: u64, count: u32) -> Vec<u8> {
        if offset != cursor.shown {
            // A rewind (or a jump): restart from the beginning, then skip forward.
            *cursor = Cursor::default();
            while cursor.shown < offset {
                let want = (offset - cursor.shown).min(1 << 20) as usize;
                if self.take(cursor, want).is_empty() {
                    break;
                }
            }
        }
        let mut rx = self.progress.subscribe();
        loop {
            let data = self.take(cursor, count as usize);
            if !data.is_empty() || count == 0 {
                return data;
            }
            let (total, done) = *rx.borrow_and_update();
            if done && cursor.stream >= total {
                return Vec::new();
            }
            if cursor.stream < total {
                continue;
            }
            if rx.changed().await.is_err() {
                return Vec::new();
            }
        }
    }
}

/// `d[start..end]` as one vector, copied slice-wise.
fn copy_range(d: &VecDeque<u8>, start: usize, end: usize) -> Vec<u8> {
    let (a, b) = d.as_slices();
    let mut out = Vec::with_capacity(end - start);
    if start < a.len() {
        out.extend_from_slice(&a[start..end.min(a.len())]);
    }
    if end > a.len() {
        out.extend_from_slice(&b[start.saturating_sub(a.len())..end - a.len()]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_first_and_last_halves_with_an_exact_marker() {
        let o = Output::new(10);
        o.push(b"abcde");
        o.push(b"0123456789");
        o.push(b"XYZ");
        // head "abcde", tail last 5 of "0123456789XYZ" = "89XYZ", omitted 8
        assert_eq!(
            o.snapshot(),
            b"abcde\n[toolsrv: 8 bytes omitted]\n89XYZ".to_vec()
        );
    }

    #[test]
    fn small_output_has_no_marker() {
        let o = Output::new(100);
        o.push(b"hello");
        assert_eq!(o.snapshot(), b"hello".to_vec());
    }

    #[tokio::test]
    async fn a_reader_that_fell_behind_sees_the_marker_then_the_tail() {
        let o = Output::new(10);
        let mut c = Cursor::default();
        o.push(b"abcde");
        assert_eq!(o.read(&mut c, 0, 3).await, b"abc");
        o.push(b"0123456789XYZ");
        o.finish();
        let mut got = Vec::new();
        loop {
            let at = c.shown;
            let d = o.read(&mut c, at, 100).await;
            if d.is_empty() {
                break;
            }
            got.extend(d);
        }
        assert_eq!(got, b"de\n[toolsrv: 8 bytes omitted]\n89XYZ".to_vec());
    }

    #[tokio::test]
    async fn a_live_follower_loses_nothing_and_paces_the_writer() {
        let o = std::sync::Arc::new(Output::new(16));
        let id = o.follow();
        let writer = {
            let o = o.clone();
            tokio::spawn(async move {
                for i in 0..64u8 {
                    o.push_paced(&[i; 4]).await;
                }
                o.finish();
            })
        };
        let mut c = Cursor::default();
        let mut got = Vec::new();
        loop {
            let at = c.shown;
            let d = o.read_following(id, &mut c, at, 3).await;
            if d.is_empty() {
                break;
            }
            got.extend(d);
        }
        writer.await.unwrap();
        let want: Vec<u8> = (0..64u8).flat_map(|i| [i; 4]).collect();
        assert_eq!(got, want, "a follower that keeps reading sees every byte");
        // Meanwhile the retained output stayed bounded.
        assert!(o.snapshot().len() < 16 + 40);
    }

    #[tokio::test]
    async fn a_departed_follower_does_not_hold_the_writer() {
        let o = Output::new(16);
        let id = o.follow();
        o.unfollow(id);
        for i in 0..64u8 {
            o.push_paced(&[i; 4]).await;
        }
        assert!(String::from_utf8_lossy(&o.snapshot()).contains("bytes omitted"));
    }

    #[tokio::test]
    async fn a_rewind_restarts() {
        let o = Output::new(100);
        o.push(b"hello");
        o.finish();
        let mut c = Cursor::default();
        assert_eq!(o.read(&mut c, 0, 100).await, b"hello");
        assert_eq!(o.read(&mut c, 5, 100).await, b"");
        assert_eq!(o.read(&mut c, 1, 100).await, b"ello");
    }
}
