"""The knowledge_graph job: entity notes list the memories that mention them, and, with a
model, gain the facts and relations those memories state.

The method, stated before the code:

1. *Extract* (with a model, and ``use_model`` on). The memories not yet
   extracted (not archived or superseded), oldest first, go to the model in
   batches of ``batch_size``, as untrusted data with their ids and dates.
   It answers JSON: the entities named, the facts stated about them (each
   citing the memory it comes from, and whether it replaces what was known
   before) and the typed relations between them. Code checks every item:
   a memory id not in the batch, a name that cannot be a file name, an
   absurdly long name, category or text is dropped. The entity notes are
   made where missing (:meth:`Entities.ensure`); a fact is recorded with
   ``valid_from`` = the memory's date and ``source`` = a block reference to
   it. The model only *nominates* a change (``supersedes``); code closes the
   old fact's validity window (Graphiti's way), and both stay readable. A
   cut-off, empty or unparsable answer changes nothing: its memories wait
   for the next run. Which memories were extracted, with a hash of their
   text then, is kept in ``.memvault/jobs/knowledge_graph.json``: a memory
   edited since is extracted again, an unchanged one never twice, and one
   whose run was undone (``memvault jobs undo``) is extracted again too.
   Reaching the run's model budget ends extraction; what was done is kept.
2. *Mentions* (always; the result without a model). For every entity (the
   notes in ``Contacts/``, ``Projects/`` and ``Entities/``), the memories
   that name it, its title, file name or an alias as whole words in any
   case, or carry it as a tag (``#acme`` or ``#project/acme`` for "Acme"),
   newest first, at most ``max_mentions``, are listed as block embeds
   (``![[Memory/Facts#^m-...]]``: Obsidian shows each memory in its place)
   under the note's ``## Mentions`` heading, between memvault's markers
   (:mod:`memvault.jobs.marked_section`). Everything around the block is the
   owner's; a note whose list is unchanged is not written. This step lives in
   :mod:`memvault.jobs.mentions`; this module keeps the run and the extraction.

Every file is kept before it changes, so ``memvault jobs undo RUN_ID``
restores a run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memvault.config import KnowledgeGraphJob
from memvault.errors import MemvaultError
from memvault.index.chunking import CHARS_PER_TOKEN
from memvault.jobs.budget import BudgetedModel, BudgetExceededError
from memvault.jobs.distill import superseded
from memvault.jobs.engine import JobContext
from memvault.jobs.mentions import pin_id, refresh_mentions
from memvault.llm.base import ChatMessage
from memvault.llm.untrusted import UNTRUSTED, unfence, wrap_material
from memvault.locations import private_file, private_state_dir
from memvault.text import flaw
from memvault.vault.entities import (
    MAX_FACT_CHARS,
    MAX_NAME_CHARS,
    Fact,
    Relation,
    clean_name,
    new_entity_path,
    relation_name,
)
from memvault.vault.memories import Memory
from memvault.vault.store import replace_file
from memvault.vocabulary import counted

if TYPE_CHECKING:
    from memvault.runtime import Runtime

DESCRIPTION = (
    "Lists in each entity note the memories that mention it and, with a model, records "
    "the entities, facts and relations memories state."
)

STATE_FILE = Path("jobs") / "knowledge_graph.json"
STATE_VERSION = 1
MAX_TYPE_CHARS = 40
MAX_CATEGORY_CHARS = 60
MAX_ANSWER_TOKENS = 3000
MIN_ANSWER_TOKENS = 200  # a batch's answer needs at least this much room, or the run stops
KNOWN_SHOWN = 200  # existing entity names shown to the model, so it reuses them
INSTRUCTIONS = (
    "You build a knowledge graph from the owner's memories. Each memory has an id, a date "
    "and a text. Find the entities named (people, projects, places, organisations, "
    "things), the facts the memories state about them, and the typed relations between "
    "them. Reuse the names of known entities when a memory means one of them. Answer with "
    "one JSON object and nothing else:\n"
    '{"entities": [{"name": "Melanie", "type": "person"}],\n'
    ' "facts": [{"entity": "Melanie", "category": "favourite player", "text": "Messi", '
    '"memory": "m-3fa2c1", "supersedes": true}],\n'
    ' "relations": [{"source": "Melanie", "type": "works_at", "target": "Acme", '
    '"memory": "m-3fa2c1"}]}\n'
    "A category is a short lower-case label; a fact's text is short and exact, adding "
    "nothing the memory does not say. Set supersedes to true only when the memory says "
    "that something known before about the entity in that category is no longer so "
    "(a new favourite, a move, a new job). Every fact and relation names the id of the "
    "memory it comes from. Leave out what no memory states."
)


@dataclass
class Tally:
    """What a run did, for its output line and metadata."""

    entities: int = 0
    facts: int = 0
    closed: int = 0
    relations: int = 0
    memories: int = 0
    mentions: int = 0
    waiting: int = 0

    def to_dict(self) -> dict[str, int]:
        """JSON-ready form (the run's metadata)."""
        return {
            "entities_created": self.entities,
            "facts": self.facts,
            "facts_closed": self.closed,
            "relations": self.relations,
            "memories_extracted": self.memories,
            "mention_notes": self.mentions,
        }


def graphed(runtime: Runtime) -> list[Memory]:
    """The memories the graph is drawn from: current ones, not what was said in chats."""
    return [
        m for m in runtime.memories.all() if not m.archived and not superseded(m) and not m.said
    ]


def run(ctx: JobContext) -> str:
    """Extract facts and relations with the model when there is one, then refresh mentions."""
    settings: KnowledgeGraphJob = ctx.settings or KnowledgeGraphJob()
    runtime = ctx.services
    memories = graphed(runtime)
    tally = Tally()
    why_not = "no model configured" if ctx.model is None else "use_model is off"
    if ctx.model is not None and settings.use_model:
        extract(ctx, ctx.model, settings, memories, tally)
        memories = graphed(runtime)
    tally.mentions += refresh_mentions(ctx, settings, memories)
    if any(tally.to_dict().values()):
        ctx.metadata["graph"] = tally.to_dict()
    line = (
        f"{counted(tally.entities, 'new entity', 'new entities')}, "
        f"{counted(tally.facts, 'fact')} ({tally.closed} closed), "
        f"{counted(tally.relations, 'relation')} from {counted(tally.memories, 'memory')}; "
        f"mentions refreshed in {counted(tally.mentions, 'note')}"
    )
    if ctx.model is None or not settings.use_model:
        line += f"; facts and relations are extracted with a model ({why_not})"
    elif tally.waiting:
        line += f"; {counted(tally.waiting, 'memory')} left for the next run"
    return line + "."


# -- extraction ---------------------------------------------------------------------------


@dataclass
class ExtractionState:
    """Which memories were extracted: id -> the hash of its text then and the run that did it."""

    path: Path
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, runtime: Runtime, job: str) -> ExtractionState:
        """The state file as it reads, without entries of runs undone since; a missing or
        unreadable file is an empty state (everything is extracted again, which is safe:
        a fact or relation already recorded is not recorded twice)."""
        path = runtime.vault.state_dir / STATE_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(path)
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            return cls(path)
        found = data.get("memories")
        entries = {
            str(k): v
            for k, v in (found.items() if isinstance(found, dict) else ())
            if isinstance(v, dict)
        }
        undone = {
            int(row[0])
            for row in runtime.state.query(
                "SELECT id FROM job_runs WHERE job = ? "
                "AND json_extract(metadata, '$.undone') IS NOT NULL",
                (job,),
            )
        }
        kept = {k: v for k, v in entries.items() if v.get("run") not in undone}
        return cls(path, kept)

    def done(self, memory: Memory) -> bool:
        """Whether ``memory`` was extracted as it reads now."""
        entry = self.memories.get(memory.id)
        return entry is not None and entry.get("hash") == text_hash(memory)

    def mark(self, memories: Iterable[Memory], run_id: int) -> None:
        """Record ``memories`` as extracted by run ``run_id``."""
        for memory in memories:
            self.memories[memory.id] = {"hash": text_hash(memory), "run": run_id}

    def save(self, present: Iterable[str]) -> None:
        """Write the state atomically, forgetting memories no longer in the vault."""
        ids = set(present)
        data = {
            "version": STATE_VERSION,
            "memories": {k: v for k, v in sorted(self.memories.items()) if k in ids},
        }
        private_state_dir(self.path.parent.parent)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private_file(self.path)  # owner-only; replacing the file keeps its mode
        replace_file(self.path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))


def text_hash(memory: Memory) -> str:
    """A hash of a memory's text: it changes when the text is edited."""
    return hashlib.sha256(memory.text.encode("utf-8")).hexdigest()[:16]


def waiting(memories: list[Memory], state: ExtractionState) -> list[Memory]:
    """The memories not extracted as they read now, oldest first (undated ones first)."""
    left = [m for m in memories if not state.done(m)]
    return sorted(left, key=lambda m: (m.created is not None, m.created or datetime.min))


@dataclass(frozen=True)
class Extracted:
    """One batch's answer, checked: entities (name -> type), facts and relations."""

    entities: dict[str, str]
    facts: list[tuple[str, Fact, bool, Memory]]  # entity, fact, supersedes, memory
    relations: list[tuple[str, str, str, Memory]]  # source, type, target, memory


def extract(
    ctx: JobContext,
    model: BudgetedModel,
    settings: KnowledgeGraphJob,
    memories: list[Memory],
    tally: Tally,
) -> None:
    """Send the memories not yet extracted to the model, batch by batch, and record what
    it found; stops at the run's budget, keeping what was done."""
    runtime = ctx.services
    state = ExtractionState.load(runtime, ctx.job)
    todo = waiting(memories, state)
    present = [m.id for m in memories]
    for start in range(0, len(todo), settings.batch_size):
        batch = todo[start : start + settings.batch_size]
        answer, problem = ask(model, runtime, batch)
        if problem is not None:
            ctx.record(f"memories {start + 1}-{start + len(batch)}: {problem}")
            if problem.startswith("stopped"):
                break
            continue  # these memories wait for the next run
        assert answer is not None
        apply(ctx, answer, tally)
        state.mark(batch, ctx.run_id)
        state.save(present)
        tally.memories += len(batch)
    tally.waiting = len(todo) - tally.memories


def ask(
    model: BudgetedModel, runtime: Runtime, batch: list[Memory]
) -> tuple[Extracted | None, str | None]:
    """One model call for ``batch``: what it found, or None and why not (a reason that
    starts with "stopped" ends the run's extraction)."""
    known = [f"- {e.name} ({e.type})" for e in runtime.entities.list()[:KNOWN_SHOWN]]
    lines = [
        f"- id: {m.id}; date: {m.created:%Y-%m-%d}; {m.text}"
        if m.created is not None
        else f"- id: {m.id}; {m.text}"
        for m in batch
    ]
    material = "Memories:\n" + "\n".join(lines)
    if known:
        material = "Known entities:\n" + "\n".join(known) + "\n\n" + material
    system = f"{INSTRUCTIONS}\n\n{UNTRUSTED}"
    messages = [ChatMessage("system", system), ChatMessage("user", wrap_material(material))]
    prompt = sum(len(m.content) for m in messages) // CHARS_PER_TOKEN + 1
    room = min(MAX_ANSWER_TOKENS, model.tokens_left - prompt)
    if model.calls >= model.max_calls or room < MIN_ANSWER_TOKENS:
        return (
            None,
            "stopped: the run's model budget is used up (max_model_calls, max_model_tokens)",
        )
    try:
        completion = model.complete(messages, max_tokens=room)
    except BudgetExceededError as exc:
        return None, f"stopped: {exc.message}"
    except MemvaultError as exc:  # unreachable, refused: the next batch would fare no better
        return None, f"stopped: the model call failed: {exc.message}"
    if completion.stop_reason == "length":
        return None, "the model's answer was cut off at its token limit; nothing was recorded"
    return parse_answer(completion.text, {m.id: m for m in batch})


def parse_answer(text: str, batch: dict[str, Memory]) -> tuple[Extracted | None, str | None]:
    """The answer's entities, facts and relations, each checked; what does not hold up is
    dropped (see the module docstring)."""
    text = unfence(text)
    if not text:
        return None, "the model's answer was empty; nothing was recorded"
    try:
        data = json.loads(text)
    except ValueError:
        return None, "the model's answer was not JSON; nothing was recorded"
    if not isinstance(data, dict):
        return None, "the model's answer was not a JSON object; nothing was recorded"
    entities: dict[str, str] = {}
    for item in _items(data, "entities"):
        name = _name(item.get("name"))
        if name is not None:
            entities.setdefault(name, _type(item.get("type")))
    facts = []
    for item in _items(data, "facts"):
        entity = _name(item.get("entity"))
        memory = batch.get(str(item.get("memory", "")).strip().lstrip("^"))
        category = _text(item.get("category"), MAX_CATEGORY_CHARS)
        said = _text(item.get("text"), MAX_FACT_CHARS)
        if entity is None or memory is None or category is None or said is None:
            continue
        category = " ".join(re.sub(r"[\[\]:#]", " ", category).split()).casefold()
        if not category:
            continue
        fact = Fact(
            category,
            said,
            valid_from=memory.created.date() if memory.created else None,
            source=block_ref(memory),
        )
        facts.append((entity, fact, item.get("supersedes") is True, memory))
    relations = []
    for item in _items(data, "relations"):
        source, target = _name(item.get("source")), _name(item.get("target"))
        kind = relation_name(str(item.get("type") or ""))[:MAX_TYPE_CHARS]
        memory = batch.get(str(item.get("memory", "")).strip().lstrip("^"))
        if source is None or target is None or not kind or memory is None:
            continue
        if source.casefold() == target.casefold():
            continue
        relations.append((source, kind, target, memory))
    order = {memory_id: n for n, memory_id in enumerate(batch)}
    # Older memories first, so a later one's change closes an earlier one's fact.
    facts.sort(key=lambda f: order[f[3].id])
    relations.sort(key=lambda r: order[r[3].id])
    return Extracted(entities, facts, relations), None


def _items(data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    found = data.get(key)
    return [i for i in found if isinstance(i, dict)] if isinstance(found, list) else []


def _text(value: Any, limit: int) -> str | None:
    """A one-line string of at most ``limit`` characters, else None (also for a character no
    text may hold); ``::`` becomes ``:``, so the model's text cannot forge an inline field
    such as ``[valid_until:: ...]``."""
    if not isinstance(value, str) or flaw(value) is not None:
        return None
    clean = " ".join(value.split())
    while "::" in clean:
        clean = clean.replace("::", ":")
    return clean if clean and len(clean) <= limit and "<!--" not in clean else None


def _name(value: Any) -> str | None:
    """An entity name usable as a file name, else None."""
    text = _text(value, MAX_NAME_CHARS)
    if text is None:
        return None
    try:
        return clean_name(text)
    except MemvaultError:
        return None


def _type(value: Any) -> str:
    """An entity type: a free word, lower case (``thing`` when there is none)."""
    kind = relation_name(value) if isinstance(value, str) else ""
    return kind if kind and len(kind) <= MAX_TYPE_CHARS else "thing"


def apply(ctx: JobContext, found: Extracted, tally: Tally) -> None:
    """Record one batch's checked entities, facts and relations in the entity notes."""
    entities = ctx.services.entities
    paths: dict[str, str] = {}
    known = entities.names()  # read once for the batch; what it creates is added

    def note_of(name: str) -> str:
        key = name.casefold()
        if key not in paths:
            path = entities.find(name, known)
            if path is None:
                kind = found.entities.get(name) or next(
                    (t for n, t in found.entities.items() if n.casefold() == key), "thing"
                )
                ctx.will_change(new_entity_path(name, kind))  # missing: undo deletes it
                path = entities.ensure(name, kind, known)
                tally.entities += 1
                ctx.record(f"created {path}")
            paths[key] = path
        return paths[key]

    for name in found.entities:
        note_of(name)
    for name, fact, supersedes, memory in found.facts:
        path = note_of(name)
        pin_id(ctx, memory)
        ctx.will_change(path)
        change = entities.record_fact(path, fact, supersedes=supersedes)
        if change.action == "added":
            tally.facts += 1
            tally.closed += len(change.closed)
            for old in change.closed:
                ctx.record(f"{path}: [{fact.category}] {old} closed by {fact.text}")
    for source, kind, target, memory in found.relations:
        path = note_of(source)
        target_stem = note_of(target).rsplit("/", 1)[-1].removesuffix(".md")
        pin_id(ctx, memory)
        relation = Relation(
            kind,
            target_stem,
            valid_from=memory.created.date() if memory.created else None,
            source=block_ref(memory),
        )
        ctx.will_change(path)
        if entities.record_relation(path, relation):
            tally.relations += 1


def block_ref(memory: Memory) -> str:
    """A link to the memory's block: ``[[Memory/Facts#^m-3fa2c1]]``."""
    return f"[[{memory.path.removesuffix('.md')}#^{memory.id}]]"
