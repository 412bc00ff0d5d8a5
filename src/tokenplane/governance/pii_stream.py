"""Apply a PII policy to streamed response text (mask or tokenize as it flows)."""

from __future__ import annotations

from tokenplane.governance.masking import mask_value
from tokenplane.governance.pii_policy import Finding, PiiAction, PiiBlocked, PiiPolicy, scan
from tokenplane.governance.vault import Vault

DEFAULT_HOLD = 64
CONTEXT = 64


class PiiStreamMasker:
    """Masks or tokenizes entities in a text stream split at arbitrary points.

    The last ``hold`` characters are held back (an entity may still be growing
    there), and never a part of an entity that crosses that point, so an entity
    is always transformed whole. Already-shown text is kept as context (not
    re-emitted) so boundaries work as on the whole text. The delay this adds is
    ``hold`` characters; entities longer than ``hold`` (PEM keys) are held until
    they end. ``BLOCK`` findings raise PiiBlocked (the caller ends the stream).
    """

    def __init__(self, policy: PiiPolicy, vault: Vault, hold: int = DEFAULT_HOLD) -> None:
        self._policy = policy
        self._vault = vault
        self._hold = hold
        self._context = ""  # original text already shown, for look-behinds
        self._buffer = ""
        self._consumed = 0  # original characters already shown
        self.findings: list[Finding] = []  # offsets in the original stream

    def feed(self, chunk: str) -> str:
        self._buffer += chunk
        return self._emit(final=False)

    def flush(self) -> str:
        return self._emit(final=True)

    def _emit(self, final: bool) -> str:
        if not self._buffer:
            return ""
        text = self._context + self._buffer
        offset = len(self._context)
        cut = len(text) if final else max(offset, len(text) - self._hold)
        findings = [f for f in scan(text, self._policy) if f.end > offset]
        for f in findings:
            if f.start < cut < f.end:
                cut = max(offset, f.start)
        if cut <= offset:
            return ""
        done = [f for f in findings if f.end <= cut]
        blocked = [f.entity_type for f in done if f.action is PiiAction.BLOCK]
        if blocked:
            raise PiiBlocked(blocked)
        out: list[str] = []
        pos = offset
        for f in done:
            start = max(f.start, offset)
            self.findings.append(
                Finding(
                    f.entity_type,
                    f.start - offset + self._consumed,
                    f.end - offset + self._consumed,
                    f.score,
                    f.recognizer,
                    f.action,
                )
            )
            if f.action is PiiAction.LOG:
                continue
            value = text[start : f.end]
            out.append(text[pos:start])
            if f.action is PiiAction.MASK:
                out.append(mask_value(value, f.entity_type))
            else:
                out.append(self._vault.tokenize(value, f.entity_type))
            pos = f.end
        out.append(text[pos:cut])
        shown = text[offset:cut]
        self._buffer = text[cut:]
        self._context = (self._context + shown)[-CONTEXT:]
        self._consumed += len(shown)
        return "".join(out)
