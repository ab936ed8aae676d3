"""Resolving wikilinks to files the way Obsidian does.

Obsidian matches link text case-insensitively, with or without the ``.md``
extension, as a full path from the vault root or as the shortest unique
path ("Note" or "Folder/Note" when several notes share a name). When a
name is ambiguous it prefers the note next to the linking note, then the
one closest to the vault root. memvault also accepts a note's aliases.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterable


def names_of(path: str) -> set[str]:
    """The case-folded names a link may use for ``path`` by basename ("note", "note.md")."""
    name = posixpath.basename(path).casefold()
    return {name, _strip_md(name)}


def link_key(target: str) -> str:
    """The name a link target points at, for finding links that may resolve to a file."""
    return _strip_md(posixpath.basename(target.strip().replace("\\", "/"))).casefold()


def _strip_md(path: str) -> str:
    return path[:-3] if path.lower().endswith(".md") else path


class LinkResolver:
    """Resolves link targets against a fixed set of vault files."""

    def __init__(self, paths: Iterable[str], aliases: dict[str, list[str]] | None = None) -> None:
        self._paths: set[str] = set()
        self._by_full: dict[str, str] = {}
        self._by_name: dict[str, list[str]] = defaultdict(list)
        self._by_alias: dict[str, list[str]] = defaultdict(list)
        self._aliases: dict[str, list[str]] = {}
        alias_map = aliases or {}
        for path in sorted(set(paths)):
            self.add(path, alias_map.get(path, ()))

    @property
    def paths(self) -> list[str]:
        """Every file the resolver knows, sorted."""
        return sorted(self._paths)

    def add(self, path: str, aliases: Iterable[str] = ()) -> None:
        """Learn a file (and the note's aliases)."""
        if path in self._paths:
            self.remove(path)
        self._paths.add(path)
        for key in {path.casefold(), _strip_md(path).casefold()}:
            self._by_full.setdefault(key, path)
        for key in names_of(path):
            self._by_name[key].append(path)
        self._aliases[path] = [a for a in aliases if a]
        for alias in self._aliases[path]:
            self._by_alias[alias.casefold()].append(path)

    def aliases_of(self, path: str) -> list[str]:
        """The aliases the resolver knows for ``path``."""
        return list(self._aliases.get(path, []))

    def remove(self, path: str) -> None:
        """Forget a file."""
        if path not in self._paths:
            return
        self._paths.discard(path)
        for key in {path.casefold(), _strip_md(path).casefold()}:
            if self._by_full.get(key) == path:
                del self._by_full[key]
                other = next(
                    (p for p in self._paths if key in {p.casefold(), _strip_md(p).casefold()}), None
                )
                if other is not None:
                    self._by_full[key] = other
        for key in names_of(path):
            self._by_name[key] = [p for p in self._by_name[key] if p != path]
        for alias in self._aliases.pop(path, []):
            key = alias.casefold()
            self._by_alias[key] = [p for p in self._by_alias[key] if p != path]

    def resolve(self, target: str, source: str | None = None) -> str | None:
        """The vault path ``target`` links to from ``source``, or None if unresolved.

        An empty target (``[[#Heading]]``) is the source note itself.
        """
        wanted = target.strip().replace("\\", "/").lstrip("/")
        if not wanted:
            return source
        key = wanted.casefold()
        source_dir = posixpath.dirname(source) if source else ""
        # 1. Relative to the linking note's folder, then from the vault root.
        if source_dir:
            relative = posixpath.normpath(posixpath.join(source_dir, wanted)).casefold()
            if relative in self._by_full:
                return self._by_full[relative]
        if key in self._by_full:
            return self._by_full[key]
        # 2. By name or by path suffix ("Folder/Note"), preferring the nearest file.
        name = posixpath.basename(key)
        candidates = [
            p
            for p in self._by_name.get(name, [])
            if "/" not in key
            or _strip_md(p).casefold().endswith("/" + _strip_md(key))
            or p.casefold().endswith("/" + key)
        ]
        if candidates:
            return min(candidates, key=lambda p: _preference(p, source_dir))
        # 3. By alias.
        aliased = self._by_alias.get(key)
        if aliased:
            return min(aliased, key=lambda p: _preference(p, source_dir))
        return None

    def shortest_link(self, path: str) -> str:
        """The shortest link text that resolves to ``path`` (what Obsidian would write)."""
        name = _strip_md(posixpath.basename(path))
        if len(self._by_name.get(name.casefold(), [])) <= 1:
            return name
        return _strip_md(path)


def _preference(path: str, source_dir: str) -> tuple[int, int, str]:
    same_folder = 0 if posixpath.dirname(path) == source_dir else 1
    return same_folder, path.count("/"), path
