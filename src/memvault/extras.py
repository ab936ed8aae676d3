"""The parts of memvault that the default install leaves out, and the sentence that names the
extra bringing one when it is asked for.

The default install (``pip install memvault``) stores, searches with the local model, serves
the console, MCP and the channels. What it leaves out is installed as an extra of the
package, ``pip install 'memvault[NAME]'``: a language model's SDK (``openai``: every
OpenAI-compatible server, for ``llm.provider = "openai"`` and ``embedder.provider =
"openai"``; ``anthropic``), torch (``embedder.runtime = "torch"``), PostgreSQL
(``postgres``). A part asked for and missing is imported through :func:`require`, which
answers with one sentence naming the extra, never an ImportError.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from memvault.errors import MemvaultError, MissingExtraError


def install_command(extra: str) -> str:
    """The command that adds ``extra`` to this install."""
    return f"pip install 'memvault[{extra}]'"


def missing_sentence(module: str, extra: str, needed_for: str) -> str:
    """``needed_for`` needs ``module``, and the command that installs it."""
    return (
        f"{needed_for} needs the {module} package, which the default install leaves out: "
        f"install it with {install_command(extra)}."
    )


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: imports of it are refused
    return importlib.util.find_spec(module) is not None


def require(
    module: str,
    *,
    extra: str,
    needed_for: str,
    error: type[MemvaultError] = MissingExtraError,
) -> ModuleType:
    """``module`` imported, or ``error`` with one sentence naming ``extra`` when it is not
    installed. A module that is there but fails to import for another reason (a broken
    install of one of its own dependencies) is let through as it is."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.partition(".")[0]
        if exc.name is not None and exc.name.partition(".")[0] != top:
            raise
        raise error(missing_sentence(top, extra, needed_for), extra=extra) from exc
