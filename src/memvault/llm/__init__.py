"""Language models: one interface over OpenAI-compatible and Anthropic APIs, with retries
and the marking of untrusted text."""
