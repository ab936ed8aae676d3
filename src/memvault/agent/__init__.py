"""The agent: memvault's own loop (a model, the tool registry, approvals) in ``loop``, what
a run tells its callers in ``results``, the model's context window in ``window``, its
system prompt built from memory in ``prompt``, and the sessions it keeps per channel and
sender in ``sessions``."""
