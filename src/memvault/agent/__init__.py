"""The agent: memvault's own loop (a model, the tool registry, approvals), its system
prompt built from memory, and the sessions it keeps per channel and sender."""
