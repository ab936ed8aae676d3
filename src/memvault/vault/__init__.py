"""The vault: Markdown files as the source of truth, and the typed notes in them.

- Files: ``store`` (:class:`~memvault.vault.store.Vault`, every file operation on the
  vault) on ``paths`` (vault-relative paths checked as written), ``bounds`` (where a
  path really leads), ``disk`` (atomic replacement, appends and syncs, the note an
  edit saw), ``locks`` (named cross-process locks) and ``os_errors`` (a refusal of the
  filesystem as one sentence).
- Notes: ``note`` (frontmatter and body), ``markdown`` (links, tags, headings, block
  ids), ``links`` (wikilinks resolved), ``notes`` (any note), ``templates`` and
  ``layout`` (the vault's folders and ``memvault init``), ``summary``.
- Memories: ``memories`` (:class:`~memvault.vault.memories.Memories`, storing and
  finding them) on ``memory_format`` (one memory's line) and ``memory_files`` (the
  category files, read and changed).
- Typed notes: ``collection`` (a folder of one kind), ``tasks``, ``contacts``,
  ``projects``, ``journal``, ``entities`` (the knowledge graph's nodes), ``skills``.
"""
