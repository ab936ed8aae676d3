"""The context's Skills section: the skills in Skills/ that match the request."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memvault.runtime import Runtime
from memvault.vault.skills import Skill

Write = Callable[[str, str], Path]

SOURDOUGH = (
    "---\ntags: [skill]\n---\n# Bake sourdough\n\n## When to use\n"
    "The owner wants to bake sourdough bread.\n\n## Steps\n"
    "1. Feed the starter the evening before\n2. Mix, fold and proof\n3. Bake at 240 C\n"
)


def skills_section(markdown: str) -> str | None:
    if "## Skills\n" not in markdown:
        return None
    return markdown.split("## Skills\n")[1].split("\n\n")[0].rstrip("\n")


def test_matching_skills_are_offered_with_their_steps_and_only_there(
    runtime: Runtime, write: Write
) -> None:
    write("Skills/Bake sourdough.md", SOURDOUGH)
    invoice = Skill(
        "Send an invoice",
        "A customer needs an invoice for an order.",
        ("Look up the customer's contact", "Write the invoice as a PDF"),
        ("skill", "auto-discovered"),
    )
    write("Skills/Send an invoice.md", invoice.render())
    write("Recipes/Rye.md", "# Rye\n\nRye bread needs a sourdough starter too.\n")
    runtime.index.sync()
    markdown = runtime.context.build("how do I bake sourdough bread?")
    assert skills_section(markdown) == (
        "- [[Skills/Bake sourdough|Bake sourdough]]: The owner wants to bake sourdough bread. "
        "Steps: 1. Feed the starter the evening before 2. Mix, fold and proof 3. Bake at 240 C"
    )
    relevant = markdown.split("## Relevant to:")[1].split("## Skills")[0]
    assert "[[Recipes/Rye]]" in relevant
    assert "Skills/" not in relevant  # a skill is shown once, in its own section
    invoice_context = runtime.context.build("invoice for the customer")
    assert skills_section(invoice_context) == (
        "- [[Skills/Send an invoice|Send an invoice]]: A customer needs an invoice for an "
        "order. Steps: 1. Look up the customer's contact 2. Write the invoice as a PDF"
    )


def test_no_section_without_a_matching_skill_a_query_or_the_folder(
    runtime: Runtime, write: Write, vault_path: Path
) -> None:
    write("Skills/Bake sourdough.md", SOURDOUGH)
    runtime.index.sync()
    assert skills_section(runtime.context.build("renew my passport")) is None
    assert skills_section(runtime.context.build()) is None
    (vault_path / "Skills/Bake sourdough.md").unlink()
    (vault_path / "Skills").rmdir()
    runtime.index.sync()
    assert skills_section(runtime.context.build("bake sourdough")) is None


def test_a_short_budget_leaves_the_skills_out_and_says_so(runtime: Runtime, write: Write) -> None:
    write("Skills/Bake sourdough.md", SOURDOUGH)
    runtime.index.sync()
    result = runtime.context.build_result("bake sourdough", budget_tokens=60)
    assert "## Skills" not in result.markdown
    assert "Skills (1)" in result.markdown
