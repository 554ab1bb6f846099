"""What a statement refers to: the constants it names without binding them, and the namespaces its file opens.

Two statements with the same text can mean different things when their names resolve to different constants; the
faithfulness check and decontamination compare statements by these.
"""

from __future__ import annotations

import re

from lean_pool.lean_source.commands import read_commands
from lean_pool.lean_source.lexer import COMMENTS_AND_LITERALS, lex
from lean_pool.lean_source.statements import SAME_TOKEN, bound_names, leading_binders
from lean_pool.lean_source.tokens import NAME, TOKEN_BEFORE, plain_name

# Words a statement is written with that are Lean's syntax, not constants it refers to.
_TERM_KEYWORDS = frozenset({"fun", "λ", "let", "have", "show", "from", "by", "if", "then", "else", "match", "with",
                            "do", "at", "in", "Type", "Sort", "Prop", "sorry"})
# Words of an `open` command that are not namespaces.
_OPEN_WORDS = frozenset({"open", "scoped", "in"})


def referenced_constants(signature: str) -> list[str]:
    """The names a statement refers to without binding them itself, in order of first mention, each once:
    the constants whose definitions decide what it means. A field of a bound variable (`s.card`) is left out:
    its constant depends on a type only Lean knows."""
    groups, _ = leading_binders(signature)
    spelled = signature
    for spelling, token in SAME_TOKEN:
        spelled = spelled.replace(spelling, token)
    bound = set(bound_names(groups, spelled))
    code = lex(signature).blanked(COMMENTS_AND_LITERALS)
    names = (plain_name(m.group()) for m in re.finditer(TOKEN_BEFORE + NAME.pattern, code))
    return [name for name in dict.fromkeys(names)
            if name not in _TERM_KEYWORDS and name.split(".")[0] not in bound]


def opened_namespaces(text: str) -> list[str]:
    """The namespaces `open` commands of `text` make visible (`open Real` lets `exp` mean `Real.exp`), in order,
    each once; `hiding`, `renaming` and explicit name lists end what is read of a command."""
    opened: list[str] = []
    for command in read_commands(text):
        if command.kind != "open":
            continue
        for word in command.text.split():
            if word in ("hiding", "renaming") or word.startswith("("):
                break
            if word not in _OPEN_WORDS and NAME.fullmatch(word) and word not in opened:
                opened.append(word)
    return opened
