"""How a model should use memvault's memory: one text for every surface.

The MCP server serves it as the ``memory_guide`` prompt; the agent loop puts it
in its system prompt. Explicit, implicit and defensive remembering, and when
to search first.
"""

MEMORY_GUIDE = """\
You have a long-term memory kept by memvault: an Obsidian vault of notes, tasks, \
contacts, a daily journal and atomic memories, searchable by keywords and meaning.

When to search (memory_search, recall, vault_search):
- before answering about prior work, decisions, dates, people, preferences or todos;
- when the owner refers to something that may have come up before;
- at the start of a task, for related earlier work (get_context gives an overview).

When to remember (remember: one self-contained sentence per memory):
- explicit: the owner asks you to remember something;
- implicit: a decision is made, a preference or a correction is stated, or an \
important fact comes up (names, dates, commitments);
- defensive: before your context runs out in a long conversation, store what you \
would otherwise lose.

Pick a category (preference, decision, fact, context, project, person, correction, \
pattern, issue) and an importance from 0 to 1. Do not store secrets such as passwords. \
Track multi-session work with task_create / task_update, people with contact_create, \
and what you did with journal_append.
"""
