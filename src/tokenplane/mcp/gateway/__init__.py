"""The MCP gateway's shell: upstream transports, the session store, the service that
answers JSON-RPC messages, its audit records and metrics."""
