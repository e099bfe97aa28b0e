"""MCP: the server at /mcp and the gateway to third-party MCP servers."""
