"""The daemon: HTTP API, event bus, sessions, telemetry, and the client the CLI uses."""
