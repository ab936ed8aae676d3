"""The documentation's generated pages: the configuration and CLI references.

Written from the code at build time (``make docs`` runs MkDocs, whose hook in
``scripts/docs_hooks.py`` calls these), so they cannot drift from the settings
model (:mod:`memvault.config`) or the Typer app (:mod:`memvault.cli.app`). Nothing
is committed: ``python scripts/docs_reference.py OUT_DIR`` writes the pages to look at.
"""

from __future__ import annotations

import ast
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

CONFIG_PAGE = "reference/configuration.md"
CLI_PAGE = "reference/cli.md"
HTTP_PAGE = "reference/http-api.md"
TROUBLE_PAGE = "troubleshooting.md"
SPEC_FILE = "reference/openapi.json"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _type_name(annotation: Any) -> str:
    """A settings field's type as a person reads it (``int``, ``list[str]``, ``a | b``)."""
    if annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(arg) for arg in args).replace("'", '"')
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(arg) for arg in args)}]"
    return getattr(annotation, "__name__", str(annotation))


def _default(info: FieldInfo) -> str:
    """A field's default as TOML-ish text, or ``required``."""
    if info.default is not PydanticUndefined:
        value = info.default
    elif info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    else:
        return "required"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Path):
        return f'"{value}"'
    return str(value)


def _section_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def config_page() -> str:
    """Every section, field, type, default and description of :class:`memvault.config.Settings`."""
    from memvault.config import ENV_PREFIX, Settings

    lines = [
        "# Configuration reference",
        "",
        "Generated from memvault's settings model (`memvault.config.Settings`) when the",
        "documentation is built, so it lists exactly what this version reads. Settings live",
        "in the vault's `.memvault/config.toml`, under the section named in each heading;",
        f"each is also read from an environment variable (`{ENV_PREFIX}SECTION__FIELD`),",
        "which wins over the file, and command-line flags win over both.",
        "See [Configuration](../configuration.md) for an annotated example.",
        "",
    ]

    def emit(model: type[BaseModel], path: list[str], table: str | None = None) -> None:
        """One section's table, then its sub-sections; ``table`` names an entry of a
        table or array of tables (``[privacy.contacts."NAME"]``), set in the file only."""
        plain: list[tuple[str, FieldInfo]] = []
        nested: list[tuple[str, type[BaseModel]]] = []
        entries: list[tuple[str, type[BaseModel]]] = []
        for name, info in model.model_fields.items():
            sub = _section_model(info.annotation)
            if sub is not None:
                nested.append((name, sub))
                continue
            plain.append((name, info))
            origin = typing.get_origin(info.annotation)
            for arg in typing.get_args(info.annotation):
                inner = _section_model(arg)
                if inner is not None and origin is dict:
                    entries.append((f'[{".".join([*path, name])}."NAME"]', inner))
                elif inner is not None and origin is list:
                    entries.append((f"[[{'.'.join([*path, name])}]]", inner))
        if plain:
            title = f"`{table}`" if table else f"`[{'.'.join(path)}]`" if path else "Top level"
            lines.extend([f"## {title}", ""])
            doc = (model.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
            if doc:
                lines.extend([doc, ""])
            lines.append("| Setting | Type | Default | Environment variable | Description |")
            lines.append("|---|---|---|---|---|")
            for name, info in plain:
                variable = ENV_PREFIX + "__".join([*path, name]).upper()
                env = "the file only" if table else f"`{variable}`"
                lines.append(
                    f"| `{name}` | {_cell(_type_name(info.annotation))} | "
                    f"`{_cell(_default(info))}` | {env} | {_cell(info.description or '')} |"
                )
            lines.append("")
        for label, inner in entries:
            emit(inner, path, table=label)
        for name, sub in nested:
            emit(sub, [*path, name], table)

    emit(Settings, [])
    return "\n".join(lines) + "\n"


def cli_page() -> str:
    """Every command of ``memvault``, its arguments and options, from the Typer app."""
    import typer.main

    from memvault.cli.app import app

    root = typer.main.get_command(app)
    lines = [
        "# CLI reference",
        "",
        "Generated from memvault's command-line app (`memvault.cli.app`) when the",
        "documentation is built. `memvault COMMAND --help` prints the same on a terminal.",
        "",
    ]

    def emit(command: Any, path: list[str], parent: Any) -> None:
        ctx = type(root).context_class(command, info_name=path[-1], parent=parent)
        if getattr(command, "hidden", False):
            return
        depth = min(len(path) + 1, 4)
        lines.extend([f"{'#' * depth} `{' '.join(path)}`", ""])
        if command.help:
            lines.extend([command.help.strip(), ""])
        pieces = command.collect_usage_pieces(ctx)
        lines.extend(["```text", f"{' '.join(path)} {' '.join(pieces)}".rstrip(), "```", ""])
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if params:
            lines.append("| Argument or option | Type | Default | Description |")
            lines.append("|---|---|---|---|")
            for param in params:
                names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
                kind = "flag" if getattr(param, "is_flag", False) else param.type.name
                default = param.default
                shown = (
                    "" if default in (None, (), [], False) or callable(default) else f"`{default}`"
                )
                if param.required:
                    shown = "required"
                text = getattr(param, "help", None) or ""
                lines.append(f"| {names} | {_cell(str(kind))} | {_cell(shown)} | {_cell(text)} |")
            lines.append("")
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    emit(sub, [*path, name], ctx)

    emit(root, ["memvault"], None)
    return "\n".join(lines) + "\n"


def openapi_spec() -> dict[str, Any]:
    """The daemon's OpenAPI spec, from its app over a throwaway vault (no server starts)."""
    import tempfile

    from memvault.config import Settings
    from memvault.gateway.app import create_app
    from memvault.gateway.daemon import Daemon
    from memvault.runtime import Runtime

    with tempfile.TemporaryDirectory(prefix="memvault-docs-") as folder:
        settings = Settings(vault=Path(folder), embedder={"provider": "none"})  # type: ignore[arg-type]
        runtime = Runtime.open(settings, create=True)
        try:
            daemon = Daemon(runtime, host="127.0.0.1", port=0, background=False)
            return create_app(daemon).openapi()
        finally:
            runtime.close()


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if schema.get("type") == "array":
        return f"array of {_schema_name(schema.get('items', {}))}"
    if "anyOf" in schema:
        return " | ".join(_schema_name(part) for part in schema["anyOf"])
    return str(schema.get("type", "any"))


def http_page(spec: dict[str, Any]) -> str:
    """Every route of the daemon's HTTP API: method, path, what it does, parameters, bodies."""
    lines = [
        "# HTTP API reference",
        "",
        "Generated from the daemon's OpenAPI schema when the documentation is built; the",
        "running daemon serves the same at `/openapi.json` (and this build's copy is",
        "[openapi.json](openapi.json)). Every route but the health check needs",
        "`Authorization: Bearer <token>`; see [The daemon](../daemon.md) and",
        "[Security and privacy](../security.md) for tokens and their scopes.",
        "",
    ]
    for path, operations in spec.get("paths", {}).items():
        for method, operation in operations.items():
            lines.extend([f"## `{method.upper()} {path}`", ""])
            summary = operation.get("summary")
            if summary:
                lines.extend([f"**{summary}**", ""])
            description = (operation.get("description") or "").strip()
            if description:
                lines.extend([description, ""])
            params = operation.get("parameters", [])
            if params:
                lines.append("| Parameter | In | Type | Required | Description |")
                lines.append("|---|---|---|---|---|")
                for param in params:
                    lines.append(
                        f"| `{param['name']}` | {param.get('in', '')} | "
                        f"{_cell(_schema_name(param.get('schema', {})))} | "
                        f"{'yes' if param.get('required') else 'no'} | "
                        f"{_cell(param.get('description', ''))} |"
                    )
                lines.append("")
            body = operation.get("requestBody", {}).get("content", {})
            for kind, content in body.items():
                lines.extend(
                    [f"Request body ({kind}): `{_schema_name(content.get('schema', {}))}`", ""]
                )
            responses = operation.get("responses", {})
            if responses:
                lines.append("| Status | Meaning | Body |")
                lines.append("|---|---|---|")
                for status, response in responses.items():
                    shapes = [
                        _schema_name(content.get("schema", {}))
                        for content in response.get("content", {}).values()
                    ]
                    lines.append(
                        f"| {status} | {_cell(response.get('description', ''))} | "
                        f"{_cell(', '.join(f'`{shape}`' for shape in shapes))} |"
                    )
                lines.append("")
    return "\n".join(lines) + "\n"


def _message(node: ast.expr) -> str | None:
    """A doctor message's text as a person reads it; ``…`` where a value goes."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) else "…" for part in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _message(node.left), _message(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.IfExp):
        return _message(node.body)
    return None  # an error's own sentence, shown as it comes


def troubleshooting_page() -> str:
    """Every warning and error ``memvault doctor`` can give, each with what to do, from
    the doctor's own code (:mod:`memvault.gateway.doctor`)."""
    import inspect

    import memvault.gateway.doctor as doctor

    tree = ast.parse(inspect.getsource(doctor))
    found: dict[str, list[tuple[str, str]]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Check"):
            continue
        if len(node.args) < 3 or not isinstance(node.args[0], ast.Constant):
            continue
        status_node = node.args[1]
        status = status_node.value if isinstance(status_node, ast.Constant) else "warning"
        text = _message(node.args[2])
        if status == "ok" or text is None:
            continue
        found.setdefault(str(node.args[0].value), []).append((str(status), text))
    lines = [
        "# Troubleshooting",
        "",
        "`memvault doctor` (and the daemon's `GET /v1/doctor`) checks the vault, the index,",
        "the embedder, the pending vectors, the disk, the token and the server, and answers",
        "each with one sentence that says what to do. These are every warning and error it",
        "can give, generated from its code when the documentation is built (`…` stands for",
        "a value: a path, a count, the system's own reason). A check whose sentence is an",
        "error's own (a damaged index, a missing model) says it as it comes.",
        "See also [Exit codes](exit-codes.md).",
        "",
        "```sh",
        "memvault doctor          # every check; exit 1 when one errors (--json for scripts)",
        "```",
        "",
    ]
    for name in sorted(found):
        lines.extend([f"## `{name}`", ""])
        seen: set[tuple[str, str]] = set()
        for status, text in found[name]:
            if (status, text) in seen:
                continue
            seen.add((status, text))
            lines.append(f"- **{status}**: {text}")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    out = Path(argv[1]) if len(argv) > 1 else Path("site-reference")
    spec = openapi_spec()
    pages = (
        (CONFIG_PAGE, config_page()),
        (CLI_PAGE, cli_page()),
        (HTTP_PAGE, http_page(spec)),
        (TROUBLE_PAGE, troubleshooting_page()),
        (SPEC_FILE, json.dumps(spec, indent=2)),
    )
    for page, text in pages:
        target = out / page
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(target)


if __name__ == "__main__":
    main(sys.argv)
