//! What this deployment chats over: the one table the api's relay
//! dispatches on (`api::chat::relay`), and from which the build says
//! truthfully which agents can be chatted with (`communicationSupported`,
//! `routingSupported`) and what each catalog adapter supports
//! (`/adapters/details`).

use crate::catalog::{AdapterDetail, ChatProfile};
use crate::Agent;

/// An adapter the api has: the endpoint name an agent record uses for it,
/// its protocol, and whether it relays a reply as it streams in.
#[derive(Debug, PartialEq, Eq)]
pub struct ChatAdapter {
    pub endpoint: &'static str,
    pub protocol: &'static str,
    pub streaming: bool,
    pub description: &'static str,
}

/// In the order an agent's endpoints are tried.
pub const CHAT_ADAPTERS: &[ChatAdapter] = &[
    ChatAdapter {
        endpoint: "a2a",
        protocol: "a2a",
        streaming: true,
        description:
            "A2A 1.0 (SendMessage, SendStreamingMessage) or 0.3 (message/send, message/stream), from the agent card",
    },
    ChatAdapter {
        endpoint: "mcp",
        protocol: "mcp",
        streaming: false,
        description: "MCP over streamable HTTP (2025-06-18 with initialize, or stateless 2026-07-28): the message \
            `tools` lists the tools; a tool's name and JSON arguments call it",
    },
    ChatAdapter {
        endpoint: "openrouter",
        protocol: "openrouter",
        streaming: true,
        description: "OpenAI-compatible chat completions of a model-routing provider; needs a signed-in payer, \
            billed from the provider's reported token usage",
    },
    ChatAdapter {
        endpoint: "http",
        protocol: "http",
        streaming: false,
        description: "plain HTTP: POST {message, sessionId, history} as JSON; the reply's text from JSON or text/plain",
    },
];

/// The adapter the api would use for an agent with these endpoint names.
pub fn adapter_for<'a>(endpoints: impl Iterator<Item = &'a str> + Clone) -> Option<&'static ChatAdapter> {
    CHAT_ADAPTERS.iter().find(|a| endpoints.clone().any(|e| e == a.endpoint))
}

/// Whether the api can chat with (and route to) the agent.
pub fn chattable(agent: &Agent) -> bool {
    adapter_for(agent.endpoints.keys().map(String::as_str)).is_some()
}

/// Sets each agent's `communicationSupported` and `routingSupported` from
/// the table, whatever its source said.
pub fn mark(agents: &mut [Agent]) {
    for agent in agents {
        let able = chattable(agent);
        agent.communication_supported = able;
        agent.routing_supported = able;
    }
}

/// The catalog's adapters as this deployment runs them: chat, routing and
/// streaming from the table.
pub fn describe(adapters: &[AdapterDetail]) -> Vec<AdapterDetail> {
    adapters
        .iter()
        .map(|adapter| {
            let speaks: Vec<&ChatAdapter> =
                CHAT_ADAPTERS.iter().filter(|c| adapter.supported_protocols.iter().any(|p| p == c.protocol)).collect();
            let able = adapter.enabled && !speaks.is_empty();
            let mut described = adapter.clone();
            let held = adapter.chat_profile.clone();
            described.chat_profile = Some(match able {
                true => ChatProfile {
                    supports_chat: true,
                    delivery: Some("direct".into()),
                    transport: held.as_ref().and_then(|p| p.transport.clone()).or(Some("https".into())),
                    streaming: Some(speaks.iter().any(|c| c.streaming)),
                    requires_auth: held.as_ref().and_then(|p| p.requires_auth.clone()),
                    notes: None,
                },
                false => ChatProfile {
                    supports_chat: false,
                    delivery: None,
                    transport: None,
                    streaming: None,
                    requires_auth: None,
                    notes: Some(format!(
                        "this deployment chats over {} only",
                        CHAT_ADAPTERS.iter().map(|c| c.protocol).collect::<Vec<_>>().join(" and ")
                    )),
                },
            });
            described.capabilities.communication = able;
            described.capabilities.routing = able;
            described
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_is_chattable_by_the_first_endpoint_the_table_has() {
        let check = |endpoints: &[&str], expected: Option<&str>| {
            assert_eq!(adapter_for(endpoints.iter().copied()).map(|a| a.endpoint), expected, "{endpoints:?}");
        };
        check(&["a2a"], Some("a2a"));
        check(&["http", "a2a"], Some("a2a"));
        check(&["inboundTopic", "http"], Some("http"));
        check(&["inboundTopic"], None);
        check(&["mcp"], Some("mcp"));
        check(&["hcs-10", "xmtp"], None);
        check(&[], None);
    }
}
