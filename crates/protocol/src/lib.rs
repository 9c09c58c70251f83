//! toolsrv protocol types shared by server and client (docs/protocol.md): the request payload
//! and its parser, [`ToolResult`], [`ProcStat`], [`ToolInfo`], the bypass broker's messages,
//! completion messages, and Go-style durations and byte sizes.

#![forbid(unsafe_code)]

pub mod bypass;
pub mod completion;
pub mod duration;
pub mod limits;
pub mod payload;
pub mod procstat;
pub mod refusal;
pub mod result;
pub mod size;
pub mod timestamp;
pub mod toolinfo;

pub use bypass::{BypassRequest, Resolution};
pub use completion::completion_message;
pub use duration::{format_duration, parse_duration, DurationError, DurationReason};
pub use limits::{deserialize_policy_limits, format_size, limit_reached_line, LimitName, Limits};
pub use payload::{
    convert_args, encode_payload, escape_value, parse_payload, unescape_value, validate_agent_id,
    validate_tool_name, NameError, Payload, PayloadError, AGENT_ID_RULE, TOOL_NAME_RULE,
};
pub use procstat::{ProcStat, ProcState};
pub use refusal::CwdRefusal;
pub use result::{image_mime, Content, ToolResult};
pub use size::{parse_size, SizeError};
pub use timestamp::format_rfc3339_millis;
pub use toolinfo::{ToolInfo, ToolSummary};
