//! The MCP methods: `tools/list`, `tools/call`, list-changed notifications
//! (as session notifications for handshake-era clients, and through
//! `subscriptions/listen` for 2026-07-28 clients).

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorCode,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::bridge::Bridge;

const INSTRUCTIONS: &str = "toolsrv runs these tools as child processes confined by Landlock. \
Set _meta {\"toolsrv/bypass\": true} on a call to ask a human to approve an unsandboxed run.";

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("toolsrv", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let values = self
            .tool_values()
            .await
            .map_err(|e| ErrorData::internal_error(format!("toolsrv: {e}"), None))?;
        let tools: Vec<Tool> = values
            .into_iter()
            .filter_map(|v| serde_json::from_value::<Tool>(v).ok())
            .collect();
        if tools.is_empty() {
            self.hint_nothing_loaded();
        }
        // Never cached by the client: `toolsrv load` may change it at any time.
        Ok(ListToolsResult::with_all_items(tools).with_ttl_ms(0))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(crate::call::call(self, request, context).await.into())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method != crate::oversize::TOO_LARGE {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        let num = |k: &str| {
            request
                .params
                .as_ref()
                .and_then(|p| p.get(k))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        };
        Err(ErrorData::new(
            ErrorCode::INVALID_REQUEST,
            format!(
                "request too large: the message is {} bytes, and toolsrv mcp takes at most {} bytes per message (its newline included); the request was not run (docs/mcp.md, \"Limits\")",
                num("bytes"),
                num("limit")
            ),
            None,
        ))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Handshake-era session: forward every revision change until the
        // peer goes away.
        let mut rx = self.revisions();
        let peer = context.peer;
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                if peer.notify_tool_list_changed().await.is_err() {
                    break;
                }
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        (requested.tools_list_changed == Some(true))
            .then(|| SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut rx = self.revisions();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = rx.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    if context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}
