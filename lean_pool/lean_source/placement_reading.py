"""Which declarations a lemma's text may refer to, looked up the way Lean resolves a name at the place it was written.

Placing a proved lemma into a Mathlib file needs the last declaration of that file it uses; a name is read there as
Lean reads it: against the enclosing namespaces, innermost first, and the opened ones.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from lean_pool.lean_source.tokens import code_tokens


def namespace_prefixes(namespace: str) -> list[str]:
    """`A.B` → [`A.B`, `A`, ``]: the namespaces a name written inside `namespace` is looked up in, innermost first."""
    parts = namespace.split(".") if namespace else []
    return [".".join(parts[:count]) for count in range(len(parts), -1, -1)]


def _qualified(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def resolve_name(written: str, namespaces: Sequence[str], opened: Sequence[str], known: Collection[str]) -> str | None:
    """The name in `known` that `written` means where `namespaces` enclose it and `opened` are open (an `open` is
    itself read inside the enclosing namespaces), or None when it means none of them."""
    scopes = [prefix for namespace in namespaces for prefix in namespace_prefixes(namespace)] or [""]
    candidates = [_qualified(prefix, written) for prefix in scopes]
    candidates += [_qualified(_qualified(prefix, opening), written) for opening in opened for prefix in scopes]
    return next((candidate for candidate in candidates if candidate in known), None)


def constants_meant(text: str, namespaces: Sequence[str], opened: Sequence[str], known: Collection[str]) -> list[str]:
    """The names in `known` that the names of `text` may refer to, in order of first mention, each once. A name whose
    head is no constant (`s.max'`, a field of a local variable) is looked up by its tails too (`max'`), since the
    field may be a constant of the file: reading too many uses only ever places a lemma later, never too early."""
    meant: dict[str, None] = {}
    for token in code_tokens(text):
        if token.kind != "name":
            continue
        parts = token.plain.split(".")
        for start in range(len(parts)):
            found = resolve_name(".".join(parts[start:]), namespaces, opened, known)
            if found is not None:
                meant.setdefault(found)
                break
    return list(meant)
