"""One small type that carries a request's tokens by source, everywhere."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(slots=True)
class TokenCounts:
    """Input tokens split by source and cache state; output split by kind.

    ``system + history + context + tools + user`` is the prompt (framing tokens of the
    chat template are attributed to the message they frame). ``cached`` is the part
    of the prompt the upstream served from its prefix cache (a subset, not an
    addition). ``reasoning`` is a subset of ``output``.
    """

    system: int = 0
    history: int = 0
    context: int = 0
    tools: int = 0
    user: int = 0
    cached: int = 0
    output: int = 0
    reasoning: int = 0

    @property
    def prompt(self) -> int:
        return self.system + self.history + self.context + self.tools + self.user

    @property
    def total(self) -> int:
        return self.prompt + self.output

    def as_dict(self) -> dict[str, int]:
        return {f.name: int(getattr(self, f.name)) for f in fields(self)}
