"""OpenClaw: bringing an OpenClaw workspace's Markdown memory into the vault."""
