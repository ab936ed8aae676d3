"""memvault: a self-hosted memory and messaging gateway for AI agents."""

# The one place the version is written (pyproject reads it); a plain string keeps
# `memvault --version` and the daemon client free of importlib.metadata's start-up cost.
__version__ = "0.1.0"

__all__ = ["__version__"]
