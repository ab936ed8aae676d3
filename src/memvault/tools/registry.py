"""The tool registry: every capability an agent can call, described once.

A tool is a name, a description written for a model, a pydantic input
model (its JSON schema), a permission tier, annotations (read-only,
destructive, idempotent, open-world) and a handler. Every surface (MCP,
the agent loop, the HTTP API, the Anthropic / OpenAI exports) reads this
registry; none re-describes a tool.

:meth:`ToolRegistry.call` is the one way a tool runs: it validates the
input, applies the tier policy, runs the handler, and turns every failure
into a :class:`ToolResult` whose message tells the model what to try next.

A tool a setting turns on (the shell, the file bridge) is, while it is off,
left out of :meth:`ToolRegistry.offered` (what every surface lists) and
refused by :meth:`ToolRegistry.call` with a sentence naming the setting.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from memvault.errors import InvalidInputError, MemvaultError, NotFoundError
from memvault.privacy.reads import reading
from memvault.privacy.secrets import joined, noticed
from memvault.text import check_fields
from memvault.tools.policy import ApprovalRequest, Policy, Tier

if TYPE_CHECKING:
    from memvault.config import Settings
    from memvault.index.search import SearchResults
    from memvault.runtime import Runtime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Annotations:
    """Hints for clients and approvers (MCP's tool annotations)."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


READ_ONLY = Annotations(read_only=True, idempotent=True)


@dataclass
class ToolContext:
    """What a handler may use: the vault's services and the session's policy."""

    runtime: Runtime
    policy: Policy = field(default_factory=Policy)
    surface: str = "cli"
    session: str | None = None
    # True where a watcher keeps the index current; otherwise searches sync first.
    index_followed: bool = False
    # False in long-running servers: while the model loads, searches answer from keywords.
    wait_for_model: bool = True
    # What the current call's caller should be told (keywords only, say); set by handlers.
    notice: str | None = None

    def fresh_index(self) -> None:
        """Bring the index up to date before a search, unless a watcher already does."""
        if not self.index_followed:
            self.runtime.index.sync()

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """The block's reads of memories are this call's: by a tool, through this surface
        (:mod:`memvault.privacy.reads`)."""
        return reading(surface=self.surface, path="tool")

    def search(self, query: str, **options: Any) -> SearchResults:
        """A search as this surface wants it; its notice, if any, is kept for the caller."""
        with self.reading():
            results = self.runtime.searcher.search(
                query, wait_for_model=self.wait_for_model, **options
            )
        self.notice = results.notice or self.notice
        return results


NOTHING_RELEVANT = (
    "Nothing relevant: no note or memory scored above the relevance floor. The vault may "
    "not hold this; try other words, or min_score 0 to see the closest matches anyway."
)


def noted(data: dict[str, Any], results: SearchResults) -> dict[str, Any]:
    """A search tool's ``data`` with the search's ``notice`` and the ``mode`` it fell
    back to (keyword), when there is one: the model reads why, and can search again.
    An empty answer says that nothing was relevant, so it is not read as a failure."""
    if results.notice:
        data.update(mode=results.mode, notice=results.notice)
    if not results:
        data["note"] = NOTHING_RELEVANT
    return data


Handler = Callable[[ToolContext, Any], Any]


@dataclass(frozen=True)
class Tool:
    """One capability, as every surface sees it."""

    name: str
    title: str
    description: str
    input_model: type[BaseModel]
    handler: Handler
    tier: Tier = Tier.READ
    category: str = "reads"
    annotations: Annotations = READ_ONLY
    summarize: Callable[[Any], str] | None = None
    # Appended to a "not found" error: what the model should try instead.
    not_found_hint: str | None = None
    # It searches the index: the CLI starts a daemon for it rather than load the model.
    searches: bool = False
    # The setting that offers it (dotted, e.g. "tools.shell.enabled"); None: always offered.
    enabled_by: str | None = None
    # Refuses, before the owner is asked, a call that could never run (a blocked command).
    precheck: Handler | None = None

    def offered(self, settings: Settings) -> bool:
        """Whether the vault's settings offer this tool (a tool off is neither listed nor run)."""
        if self.enabled_by is None:
            return True
        value: Any = settings
        for part in self.enabled_by.split("."):
            value = getattr(value, part)
        return bool(value)

    def turned_off(self) -> str:
        """The sentence a call of this tool gets while its setting is off."""
        section, _, key = (self.enabled_by or "").rpartition(".")
        return (
            f"{self.name} is turned off in this vault; the owner can turn it on with "
            f"{key} = true under [{section}] in the vault's config."
        )

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the input, flattened and without pydantic's titles."""
        schema = self.input_model.model_json_schema(by_alias=True, mode="validation")
        return clean_schema(schema)

    def summary(self, arguments: BaseModel) -> str:
        """A short description of one call, for an approval question."""
        if self.summarize is not None:
            return self.summarize(arguments)
        return self.title.lower()


@dataclass
class ToolResult:
    """What a call gave back: data on success, a message on failure."""

    ok: bool
    data: Any = None
    error: str | None = None
    code: str | None = None
    # One sentence for the caller when the answer is less than asked (keywords only).
    notice: str | None = None
    # The HTTP status the failure's error class names (the HTTP surface answers with it).
    status: int | None = None

    def text(self) -> str:
        """The result as a model reads it: JSON for data, a sentence for an error."""
        if not self.ok:
            return f"Error: {self.error}"
        if isinstance(self.data, str):
            return self.data
        return json.dumps(self.data, ensure_ascii=False, default=str)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        if self.ok:
            return {"ok": True, "result": self.data}
        return {"ok": False, "error": {"code": self.code, "message": self.error}}


# Keywords whose value maps names a person chose (property names ...) to schemas: a name
# there is never a keyword, so a property called ``title`` stays a property.
_NAMED_SCHEMAS = ("properties", "patternProperties", "dependentSchemas")


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$defs`` references and drop the ``title`` keyword: plain JSON Schema for any
    client."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node and node["$ref"].startswith("#/$defs/"):
            return walk(defs[node["$ref"].split("/")[-1]])
        options = node.get("anyOf")
        if isinstance(options, list) and {"type": "null"} in options and len(options) == 2:
            # An optional parameter: say what it takes; leaving it out is the null.
            kept = next(o for o in options if o != {"type": "null"})
            rest = {k: v for k, v in node.items() if k != "anyOf"}
            if rest.get("default") is None:
                rest.pop("default", None)
            return walk({**kept, **rest})
        cleaned = {}
        for key, value in node.items():
            if key in ("title", "$defs"):
                continue
            if key in _NAMED_SCHEMAS and isinstance(value, dict):
                cleaned[key] = {name: walk(sub) for name, sub in value.items()}
            else:
                cleaned[key] = walk(value)
        return cleaned

    cleaned: dict[str, Any] = walk(schema)
    cleaned.setdefault("properties", {})
    cleaned["type"] = "object"
    return cleaned


def explain_validation(tool: Tool, error: ValidationError) -> str:
    """One or two sentences a model can act on, naming the fields and what they take."""
    fields = tool.input_model.model_fields
    problems: list[str] = []
    for item in error.errors():
        loc = [str(part) for part in item["loc"] if not isinstance(part, int)]
        name = loc[0] if loc else ""
        info = fields.get(name)
        shown = _public_name(name, info) if info else name
        described = f" ({info.description})" if info and info.description else ""
        if item["type"] == "missing":
            problems.append(f"'{shown}' is required{described}")
        elif name:
            problems.append(f"'{shown}' {item['msg'][0].lower()}{item['msg'][1:]}")
        else:
            problems.append(str(item["msg"]).removeprefix("Value error, "))
    accepted = ", ".join(sorted(_public_name(n, f) for n, f in fields.items()))
    return f"Invalid input for {tool.name}: {'; '.join(problems)}. It takes: {accepted}."


def _public_name(name: str, info: Any) -> str:
    alias = getattr(info, "validation_alias", None)
    choices = getattr(alias, "choices", None)
    if choices:
        first = choices[0]
        return str(first if isinstance(first, str) else name)
    return str(getattr(info, "alias", None) or name)


class ToolRegistry:
    """The tools every surface serves."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> Tool:
        """Add a tool; a second tool of the same name is a programming error."""
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool
        return tool

    def __iter__(self) -> Any:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def get(self, name: str) -> Tool:
        """The tool called ``name``; an unknown name suggests the closest ones."""
        tool = self._tools.get(name)
        if tool is None:
            close = difflib.get_close_matches(name, self._tools, n=3)
            hint = f"Did you mean {', '.join(close)}?" if close else "List the tools first."
            raise NotFoundError(f"There is no tool named {name!r}.", hint=hint)
        return tool

    def visible(self, max_tier: Tier = Tier.DANGEROUS) -> list[Tool]:
        """Tools up to ``max_tier``."""
        return [t for t in self._tools.values() if t.tier <= max_tier]

    def offered(self, settings: Settings, max_tier: Tier = Tier.DANGEROUS) -> list[Tool]:
        """Tools up to ``max_tier`` that the vault's settings turn on: what a surface lists."""
        return [t for t in self.visible(max_tier) if t.offered(settings)]

    def call(self, name: str, arguments: dict[str, Any] | None, context: ToolContext) -> ToolResult:
        """Validate, authorize and run one call; failures come back as a ToolResult."""
        try:
            tool = self.get(name)
        except NotFoundError as exc:
            return ToolResult(False, error=str(exc), code=exc.code, status=exc.http_status)
        if not tool.offered(context.runtime.settings):
            return ToolResult(False, error=tool.turned_off(), code="tool_disabled")
        if arguments is not None and not isinstance(arguments, dict):
            return ToolResult(
                False, error=f"{name} takes a JSON object of arguments.", code="validation_failed"
            )
        try:
            check_fields(arguments or {})  # text no file or index can hold: refused here
            parsed = tool.input_model.model_validate(arguments or {})
        except InvalidInputError as exc:
            return ToolResult(False, error=exc.message, code=exc.code, status=exc.http_status)
        except ValidationError as exc:
            return ToolResult(False, error=explain_validation(tool, exc), code="validation_failed")
        if tool.precheck is not None:
            try:
                tool.precheck(context, parsed)
            except MemvaultError as exc:
                return ToolResult(False, error=str(exc), code=exc.code, status=exc.http_status)
        request = ApprovalRequest(
            tool=tool.name,
            tier=tool.tier,
            category=tool.category,
            summary=tool.summary(parsed),
            arguments=parsed.model_dump(by_alias=True),
        )
        decision = context.policy.authorize(request)
        if not decision.allowed:
            return ToolResult(False, error=decision.reason, code="not_approved")
        context.notice = None
        try:
            with noticed() as removed:  # secrets kept out of what the call stores
                data = tool.handler(context, parsed)
        except NotFoundError as exc:
            message = str(exc)
            if tool.not_found_hint:
                message = f"{exc.message} {tool.not_found_hint}"
            return ToolResult(False, error=message, code=exc.code, status=exc.http_status)
        except MemvaultError as exc:
            return ToolResult(False, error=str(exc), code=exc.code, status=exc.http_status)
        except Exception as exc:  # a bug: the model gets a sentence, the log the traceback
            log.exception("tool failed", extra={"tool": name})
            return ToolResult(
                False,
                error=f"{name} failed unexpectedly ({type(exc).__name__}); "
                "try again or use another tool.",
                code="internal_error",
            )
        said = removed.notice()
        if said and isinstance(data, dict):
            # In the data too: a model reads the result's data, and MCP sends only that.
            data["secrets_removed"] = list(removed.kinds)
            data["notice"] = joined(data.get("notice"), said)
        return ToolResult(True, data=data, notice=joined(context.notice, said))
