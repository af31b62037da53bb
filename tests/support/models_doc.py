"""What the tests take from docs/models.md: its text and its worked example (the model
file of one's own client it walks through), read once."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["DOC", "EXAMPLE", "fenced"]

DOC = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text(encoding="utf-8")
"""docs/models.md."""


def fenced(text: str, language: str) -> list[str]:
    """The bodies of the fenced blocks of ``language`` in the Markdown ``text``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


EXAMPLE = next(
    block
    for block in fenced(DOC, "python")
    if block.startswith('"""My client against the 2025 transport')
)
"""The worked example: the first Python block that is the model file of my client."""
