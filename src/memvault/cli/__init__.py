"""The ``memvault`` command: one module per command group (Typer), each answering in
process or through a running daemon, with the shared options, errors and progress."""
