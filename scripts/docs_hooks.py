"""MkDocs hooks (``mkdocs.yml``: ``hooks``): the generated reference pages.

The configuration, CLI and HTTP API references (and the OpenAPI spec) are made
from the code on every build (:mod:`docs_reference`) and handed to MkDocs as pages
that exist only in the built site, so no committed copy can drift from the settings
model, the CLI or the daemon's routes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docs_reference


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site's files."""
    from mkdocs.structure.files import File

    spec = docs_reference.openapi_spec()
    for page, text in (
        (docs_reference.CONFIG_PAGE, docs_reference.config_page()),
        (docs_reference.CLI_PAGE, docs_reference.cli_page()),
        (docs_reference.HTTP_PAGE, docs_reference.http_page(spec)),
        (docs_reference.TROUBLE_PAGE, docs_reference.troubleshooting_page()),
        (docs_reference.SPEC_FILE, json.dumps(spec, indent=2)),
    ):
        files.append(File.generated(config, page, content=text))
    return files
