from __future__ import annotations

from memvault.vault.links import LinkResolver

FILES = [
    "Home.md",
    "Projects/Apollo.md",
    "Archive/Apollo.md",
    "Archive/2024/Apollo.md",
    "People/Ada Lovelace.md",
    "attachments/diagram.png",
    "Deep/Nested/Unique Note.md",
]


def test_resolves_like_obsidian() -> None:
    resolver = LinkResolver(FILES, {"People/Ada Lovelace.md": ["Ada", "Countess"]})
    assert resolver.resolve("Home") == "Home.md"
    assert resolver.resolve("home.md") == "Home.md"  # case-insensitive, extension optional
    assert resolver.resolve("unique note") == "Deep/Nested/Unique Note.md"
    assert resolver.resolve("diagram.png") == "attachments/diagram.png"
    assert resolver.resolve("Projects/Apollo") == "Projects/Apollo.md"  # full path
    assert resolver.resolve("2024/Apollo") == "Archive/2024/Apollo.md"  # shortest unique suffix
    assert resolver.resolve("Ada") == "People/Ada Lovelace.md"  # alias
    assert resolver.resolve("countess") == "People/Ada Lovelace.md"
    assert resolver.resolve("Missing") is None


def test_ambiguous_names_prefer_the_same_folder_then_the_shallowest() -> None:
    resolver = LinkResolver(FILES)
    assert resolver.resolve("Apollo", source="Archive/2024/Plan.md") == "Archive/2024/Apollo.md"
    assert resolver.resolve("Apollo", source="Archive/Index.md") == "Archive/Apollo.md"
    assert (
        resolver.resolve("Apollo", source="Home.md") == "Archive/Apollo.md"
    )  # fewest folders, then A-Z


def test_relative_paths_and_same_note_links() -> None:
    resolver = LinkResolver(FILES)
    assert resolver.resolve("../Apollo", source="Archive/2024/Plan.md") == "Archive/Apollo.md"
    assert resolver.resolve("", source="Home.md") == "Home.md"


def test_shortest_link() -> None:
    resolver = LinkResolver(FILES)
    assert resolver.shortest_link("People/Ada Lovelace.md") == "Ada Lovelace"
    assert resolver.shortest_link("Projects/Apollo.md") == "Projects/Apollo"
