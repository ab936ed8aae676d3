"""memvault: a self-hosted memory and messaging gateway for AI agents."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("memvault")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

__all__ = ["__version__"]
