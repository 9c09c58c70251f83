//! Messages over the size limit on stdio: rmcp drops a line longer than
//! [`MAX_MESSAGE`] (its `DEFAULT_MAX_LINE_LENGTH`) with a log line and the
//! client would wait forever for the answer. [`Guard`] sits between stdin and
//! rmcp: it passes every byte through unchanged (so rmcp still bounds what it
//! buffers), keeps the first bytes of each line, and after an oversized line
//! adds a small request of its own, [`TOO_LARGE`] with the oversized
//! request's id, which the handler answers with a JSON-RPC error naming the
//! size and the limit. An oversized line whose id cannot be found (a
//! notification, or an id after the first [`HEAD`] bytes) ends the session
//! instead: the client sees the server go, not silence.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The longest message (line, its newline included) the stdio transport
/// takes: rmcp's own limit, which this guard must not exceed.
pub const MAX_MESSAGE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The method of the request the guard adds after an oversized one.
pub(crate) const TOO_LARGE: &str = "toolsrv/request-too-large";

/// How much of a line's start is kept to find its id.
const HEAD: usize = 4096;

/// How much is read from the inner stream at once.
const CHUNK: usize = 64 * 1024;

/// An [`AsyncRead`] over `R` that answers oversized lines (see the module).
pub struct Guard<R> {
    inner: R,
    limit: usize,
    /// Read from `inner`, not yet given out.
    out: Vec<u8>,
    /// How much of `out` was given out.
    pos: usize,
    /// The length of the current line so far.
    line: usize,
    /// Its first bytes.
    head: Vec<u8>,
    /// Nothing more is given out: the session ends.
    closed: bool,
}

impl<R> Guard<R> {
    /// A guard over `inner` with the transport's limit.
    pub fn new(inner: R) -> Guard<R> {
        Guard::with_limit(inner, MAX_MESSAGE)
    }

    /// A guard that treats lines longer than `limit` bytes (newline
    /// included) as oversized; `limit` must be rmcp's or below.
    pub fn with_limit(inner: R, limit: usize) -> Guard<R> {
        Guard {
            inner,
            limit,
            out: Vec::new(),
            pos: 0,
            line: 0,
            head: Vec::new(),
            closed: false,
        }
    }

    /// Takes in `data` just read: passes it on, and after each oversized
    /// line ends, the request that answers it (or the end of the session).
    fn take_in(&mut self, mut data: &[u8]) {
        while !data.is_empty() && !self.closed {
            let end = data.iter().position(|&b| b == b'\n');
            let seg = &data[..end.map_or(data.len(), |i| i + 1)];
            data = &data[seg.len()..];
            self.line += seg.len();
            let keep = HEAD.saturating_sub(self.head.len()).min(seg.len());
            self.head.extend_from_slice(&seg[..keep]);
            self.out.extend_from_slice(seg);
            if end.is_none() {
                continue;
            }
            if self.line > self.limit {
                match request_id(&self.head) {
                    Some(id) => {
                        tracing::warn!(bytes = self.line, limit = self.limit, id = %id, "MCP message over the size limit: answered with an error");
                        let answer = serde_json::json!({
                            "jsonrpc": "2.0",
                            "id": serde_json::from_str::<serde_json::Value>(&id).unwrap_or_default(),
                            "method": TOO_LARGE,
                            "params": {"bytes": self.line, "limit": self.limit},
                        });
                        self.out.extend_from_slice(answer.to_string().as_bytes());
                        self.out.push(b'\n');
                    }
                    None => {
                        tracing::error!(bytes = self.line, limit = self.limit, "MCP message over the size limit and without an id in its first {HEAD} bytes: ending the session");
                        self.closed = true;
                    }
                }
            }
            self.line = 0;
            self.head.clear();
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Guard<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.pos < this.out.len() {
                let n = (this.out.len() - this.pos).min(buf.remaining());
                buf.put_slice(&this.out[this.pos..this.pos + n]);
                this.pos += n;
                if this.pos == this.out.len() {
                    this.out.clear();
                    this.pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.closed {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; CHUNK];
            let mut rb = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) if rb.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {
                    let filled = rb.filled().to_vec();
                    this.take_in(&filled);
                }
            }
        }
    }
}

/// The top-level `"id"` of the JSON object that `head` begins, as JSON text
/// (a number or a string), if it lies in `head`.
fn request_id(head: &[u8]) -> Option<String> {
    let mut p = Scanner { s: head, i: 0 };
    p.ws();
    p.eat(b'{')?;
    loop {
        p.ws();
        let key = p.string()?;
        p.ws();
        p.eat(b':')?;
        p.ws();
        let start = p.i;
        p.value()?;
        if key == b"\"id\"" {
            let text = std::str::from_utf8(&head[start..p.i]).ok()?;
            let v: serde_json::Value = serde_json::from_str(text).ok()?;
            return (v.is_number() || v.is_string()).then(|| text.to_string());
        }
        p.ws();
        p.eat(b',')?;
    }
}

/// Just enough of a JSON reader to step over values in a prefix; every step
/// is `None` at the prefix's end.
struct Scanner<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.i += 1)
    }

    /// A string, quotes included.
    fn string(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        self.eat(b'"')?;
        loop {
            match self.peek()? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return self.s.get(start..self.i);
                }
                _ => self.i += 1,
            }
        }
    }

    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
            }
            _ => {
                // A number, true, false or null: up to the next delimiter,
                // which must be there.
                while !matches!(
                    self.peek()?,
                    b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'
                ) {
                    self.i += 1;
                }
                Some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[test]
    fn the_id_is_found_before_or_after_the_method_but_not_inside_params() {
        let cases: [(&str, Option<&str>); 7] = [
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#,
                Some("7"),
            ),
            (
                r#"{"method":"tools/call","id":"a\"b","params":{"#,
                Some(r#""a\"b""#),
            ),
            (
                r#" { "jsonrpc" : "2.0" , "params" : {"id": 1, "x": [1, {"id": 2}]}, "id": 3}"#,
                Some("3"),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/x","params":{"id":5,"#,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"tools/call","params":{"content":"xxxx"#,
                None,
            ),
            (r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#, None),
            ("[1,2,3]", None),
        ];
        for (head, want) in cases {
            assert_eq!(request_id(head.as_bytes()).as_deref(), want, "{head}");
        }
    }

    async fn through(input: &[u8], limit: usize) -> String {
        let mut g = Guard::with_limit(input, limit);
        let mut out = Vec::new();
        g.read_to_end(&mut out).await.expect("read");
        String::from_utf8(out).expect("utf-8")
    }

    #[tokio::test]
    async fn lines_pass_unchanged_and_an_oversized_one_is_followed_by_its_answer() {
        let small = "{\"id\":1,\"method\":\"a\"}\n";
        assert_eq!(through(small.as_bytes(), 64).await, small);
        let big = format!("{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n", "y".repeat(200));
        let input = format!("{small}{big}{small}");
        let out = through(input.as_bytes(), 64).await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert_eq!(lines[1], big.trim_end(), "passed through for rmcp to drop");
        let added: serde_json::Value = serde_json::from_str(lines[2]).expect("JSON");
        assert_eq!(added["id"], 9);
        assert_eq!(added["method"], TOO_LARGE);
        assert_eq!(added["params"]["bytes"], big.len());
        assert_eq!(added["params"]["limit"], 64);
        assert_eq!(lines[3], small.trim_end());
        // A line of exactly the limit is not oversized.
        let exact = format!("{{\"id\":2,\"p\":\"{}\"}}\n", "z".repeat(64 - 16));
        assert_eq!(exact.len(), 64);
        assert_eq!(through(exact.as_bytes(), 64).await, exact);
    }

    #[tokio::test]
    async fn an_oversized_line_without_an_id_ends_the_session() {
        let big = format!(
            "{{\"method\":\"notifications/x\",\"params\":\"{}\"}}\n",
            "y".repeat(200)
        );
        let input = format!("{big}{{\"id\":1,\"method\":\"a\"}}\n");
        assert_eq!(through(input.as_bytes(), 64).await, big, "nothing after it");
    }
}
