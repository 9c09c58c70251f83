//! The result of a synchronous tool call, MCP's `CallToolResult` shape (docs/protocol.md, "Requests and results").

use serde::{Deserialize, Serialize};

/// One item of a tool's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Content {
    /// Text output: `{"type":"text","text":"..."}`.
    Text {
        /// The text.
        text: String,
    },
    /// Image output: `{"type":"image","data":"<base64>","mimeType":"image/png"}`.
    Image {
        /// The image bytes, base64-encoded.
        data: String,
        /// The image's MIME type, e.g. `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
}

/// What reading `proc/new` returns: `{"content":[...],"isError":false}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The output items.
    pub content: Vec<Content>,
    /// True for a failed or refused call; the text then says why.
    #[serde(rename = "isError", default)]
    pub is_error: bool,
}

impl ToolResult {
    /// A successful result holding one text item.
    pub fn text(text: impl Into<String>) -> Self {
        ToolResult {
            content: vec![Content::Text { text: text.into() }],
            is_error: false,
        }
    }

    /// An error result holding one text item that says why.
    pub fn error(text: impl Into<String>) -> Self {
        ToolResult {
            content: vec![Content::Text { text: text.into() }],
            is_error: true,
        }
    }

    /// A successful result holding one image item (`data` already base64-encoded).
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        ToolResult {
            content: vec![Content::Image {
                data: data.into(),
                mime_type: mime_type.into(),
            }],
            is_error: false,
        }
    }

    /// This result with `lines` added at the end of its text, each on a line
    /// of its own (a text item is added when the last item is an image).
    pub fn with_last_lines(mut self, lines: &[String]) -> Self {
        if lines.is_empty() {
            return self;
        }
        if !matches!(self.content.last(), Some(Content::Text { .. })) {
            self.content.push(Content::Text {
                text: String::new(),
            });
        }
        if let Some(Content::Text { text }) = self.content.last_mut() {
            for line in lines {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(line);
            }
        }
        self
    }

    /// The concatenation of every text item, in order (image items are skipped).
    pub fn joined_text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                Content::Image { .. } => None,
            })
            .collect()
    }
}

/// The image type of `bytes`, by magic number (PNG, JPEG, GIF, WebP).
pub fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_result_json_is_exact() {
        let json = serde_json::to_string(&ToolResult::text("hi \"there\"\n")).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"content":[{"type":"text","text":"hi \"there\"\n"}],"isError":false}"#
        );
        let json = serde_json::to_string(&ToolResult::error("invalid token")).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"content":[{"type":"text","text":"invalid token"}],"isError":true}"#
        );
    }

    #[test]
    fn image_result_json_is_exact() {
        let json = serde_json::to_string(&ToolResult::image("iVBORw0KGgo=", "image/png"))
            .unwrap_or_default();
        assert_eq!(
            json,
            r#"{"content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"isError":false}"#
        );
    }

    #[test]
    fn deserializes_both_shapes() {
        let r: Result<ToolResult, _> = serde_json::from_str(
            r#"{"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "QQ==", "mimeType": "image/gif"}], "isError": true}"#,
        );
        let r = r.map_err(|e| e.to_string());
        assert_eq!(
            r,
            Ok(ToolResult {
                content: vec![
                    Content::Text { text: "a".into() },
                    Content::Image {
                        data: "QQ==".into(),
                        mime_type: "image/gif".into()
                    }
                ],
                is_error: true
            })
        );
        assert_eq!(r.map(|r| r.joined_text()), Ok("a".to_owned()));
        // isError is optional in MCP and defaults to false.
        let r: Result<ToolResult, _> = serde_json::from_str(r#"{"content":[]}"#);
        assert_eq!(r.ok().map(|r| r.is_error), Some(false));
        let bad: Result<ToolResult, _> =
            serde_json::from_str(r#"{"content":[{"type":"video"}],"isError":false}"#);
        assert!(bad.is_err());
    }
}
