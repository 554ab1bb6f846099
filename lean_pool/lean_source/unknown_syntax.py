"""Where Lean may read a file otherwise than `read_commands` does: lines that start a command this reader does not
know, and the symbols a notation command adds to Lean's parser.

The verdict refuses the first and checks the second against the statement, so a file cannot hide a command, or
change what a statement's symbols mean, behind this reader's back.
"""

from __future__ import annotations

from lean_pool.lean_source.commands import Command, read_commands
from lean_pool.lean_source.lexer import lex
from lean_pool.lean_source.tokens import code_tokens

# Words that may open a line at column 0 without starting a command: clauses of the command before them.
_CLAUSE_WORDS = frozenset({"where", "termination_by", "decreasing_by", "deriving", "with", "then", "else", "at",
                           "using", "from", "in", "by", "fun", "calc", "show", "if", "match", "do", "have", "let"})
# Words that, ending a line, leave a term or tactic block open for the next line to continue.
_OPEN_ENDINGS = frozenset({"by", "fun", "with", "then", "else", "do", "from", "using", "at", "in", "show", "calc",
                           "have", "let", "match", "if", "where", "exact", "refine", "apply", "rw", "simp", "intro",
                           "obtain", "rcases", "use", "λ"})
_CLOSED_ENDINGS = frozenset(")]}⟩⦄⟫'!?_")


def unread_command_lines(text: str) -> list[tuple[int, str]]:
    """Lines that start at column 0 with a word (or `word%`) in a place where Lean would start a new command,
    but where `read_commands` knows no command: `(line, word)` for each. Lean starts a command wherever a term
    cannot go on, so a command keyword this reader has never heard of still starts one; a line counts as such a
    place when the code line before it ends a complete term (a name, a number or a closing bracket) and the word
    is not a clause of the command before (`where`, `termination_by`, ...)."""
    spans = [(command.start, command.keyword_at) for command in read_commands(text)]
    tokens = code_tokens(text)
    reports: list[tuple[int, str]] = []
    for index, token in enumerate(tokens):
        at_column_zero = token.start == 0 or text[token.start - 1] == "\n"
        if not at_column_zero or token.kind not in ("name", "percent") or "." in token.text:
            continue
        if token.text in _CLAUSE_WORDS or index == 0 or any(start <= token.start <= at for start, at in spans):
            continue
        before = tokens[index - 1]
        if before.kind == "symbol" and before.text[-1] not in _CLOSED_ENDINGS:
            continue
        if before.kind == "name" and before.text in _OPEN_ENDINGS:
            continue
        reports.append((token.line, token.text))
    return reports


NOTATION_KINDS = frozenset({"notation", "notation3", "infix", "infixl", "infixr", "prefix", "postfix"})


def notation_atoms(command: Command) -> list[str]:
    """The symbols a notation-like command (`notation`, `infixl`, ...) adds to the parser: its string literals
    before `=>`, stripped of the spaces that only say how to print them. Empty for other commands."""
    if command.kind not in NOTATION_KINDS:
        return []
    lexed = lex(command.text)
    arrow = next((t.start for t in code_tokens(command.text) if t.text == "=>"), len(command.text))
    return [
        command.text[span.start : span.end].strip()
        for span in lexed.spans
        if span.kind == "string" and span.end <= arrow and command.text[span.start : span.end].strip()
    ]
