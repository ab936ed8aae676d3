"""The MCP server (the official SDK): the tool registry over stdio and streamable HTTP."""
