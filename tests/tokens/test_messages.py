"""Content parts: order, separators and context attribution are preserved in pieces."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tokenplane.tokens.messages import normalize
from tokenplane.tokens.template_base import content_pieces

PART = st.tuples(st.text(alphabet=" \n\tab中😀", max_size=6), st.booleans())


@given(st.lists(PART, min_size=1, max_size=5), st.booleans(), st.sampled_from(["", "user\n"]))
def test_pieces_render_the_joined_content(
    parts: list[tuple[str, bool]], strip: bool, prefix: str
) -> None:
    content = [
        {"type": "text", "text": t, **({"tokenplane_source": "context"} if c else {})}
        for t, c in parts
    ]
    (m,) = normalize([{"role": "user", "content": content}]).messages
    joined = "\n".join(t for t, _ in parts)
    assert m.content == joined
    pieces = content_pieces(m, prefix, "<end>", strip=strip)
    body = joined.strip() if strip else joined
    assert "".join(p.text for p in pieces) == prefix + body + "<end>"
    assert {p.source for p in pieces} <= {"user", "context"}
    if not any(c for _, c in parts):
        assert [p.source for p in pieces] == ["user"]


def test_context_part_attribution() -> None:
    (m,) = normalize(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "question"},
                    {"type": "text", "text": "doc", "tokenplane_source": "context"},
                    {"type": "text", "text": "tail"},
                ],
            }
        ]
    ).messages
    pieces = content_pieces(m, "user\n")
    assert [(p.source, p.text) for p in pieces] == [
        ("user", "user\nquestion\n"),
        ("context", "doc\n"),
        ("user", "tail"),
    ]
