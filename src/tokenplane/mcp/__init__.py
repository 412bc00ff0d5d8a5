"""The MCP gateway's policy (docs/MCP.md): names, permissions, argument rules, limits,
JSON-RPC messages and tool results. Pure: values and ``now`` in, decisions out; the
shell (upstream transports, sessions, the service) is ``mcp/gateway/``."""
