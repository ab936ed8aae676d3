"""The vault: Markdown files as the source of truth (atomic writes, safe paths, locks),
and the typed notes in it: memories, tasks, contacts, projects, journal, entities."""
