"""What Lean reads as one token, and how its brackets nest: the words every reader in this package goes by.

A rule that looks for a keyword or a name must not fire inside a comment or a literal, nor on part of a longer name
(`Foo.axiom`, `my_elab_lemma`); reading tokens here, once, on top of `lexer`, keeps every reader agreeing on that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lean_pool.lean_source.lexer import COMMENTS, COMMENTS_AND_LITERALS, NOT_CODE, lex

# Characters that continue an identifier: a keyword glued to one of these is part of a name.
_ID_CHARS = r"\w'!?\u2080-\u209c\u1d62-\u1d6a"
TOKEN_BEFORE = rf"(?<![{_ID_CHARS}.«»])"
TOKEN_AFTER = rf"(?![{_ID_CHARS}])"
NAME_PART = rf"(?:«[^»\n]*»|[^\W\d][{_ID_CHARS}]*)"
NAME = re.compile(rf"{NAME_PART}(?:\.{NAME_PART})*")
# Commands that print or test (`#s` alone is Mathlib's notation for a cardinality, not a command).
HASH_COMMANDS = (
    "#check #check_failure #eval #print #reduce #exit #synth #guard_msgs #guard #help #lint #where #find "
    "#simp #norm_num #conv #adaptation_note #align #noalign #time #count_heartbeats #min_imports #explode"
).split()
OPENERS = "([{⟨⦃⟪"
CLOSERS = ")]}⟩⦄⟫"
# `#` commands a token can start with (Lean reads `#evalIO.println` as `#eval IO.println`): the longest wins.
_HASH_TOKENS = sorted(
    {*HASH_COMMANDS, "#check_tactic", "#check_simp", "#guard_expr", "#kernel_check", "#instances", "#widget",
     "#html", "#test", "#sample", "#long_names", "#parse", "#discr_tree_key", "#discr_tree_simp_key", "#push_neg",
     "#unfold?", "#whnf", "#whnfR", "#print", "#version", "#import_path", "#decompose", "#mex", "#leansearch",
     "#loogle", "#moogle", "#statesearch", "#defeq_abuse", "#show_deps"},
    key=len, reverse=True,
)
_TOKEN_NAME = re.compile(rf"{NAME_PART}(?:\.{NAME_PART})*")
_NUMBER = re.compile(r"\d[\d_]*(?:\.\d+)?|0[xXbBoO][0-9a-fA-F_]+")
BRACKETS = frozenset(OPENERS + CLOSERS)


def plain_name(name: str) -> str:
    """A name without `«»` escapes."""
    return name.replace("«", "").replace("»", "")


def is_name(text: str) -> bool:
    """Whether `text` is one Lean name and nothing else (`Nat.add_comm`, `«my name»`): what a name proposed in
    prose must be before it is written into a file."""
    return NAME.fullmatch(text) is not None


def normalize_space(text: str) -> str:
    """Whitespace runs become one space, and vanish inside brackets and before commas and closers,
    so two layouts of the same statement give the same text."""
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"([(\[{⟨⦃]) ", r"\1", text)
    return re.sub(r" ([)\]}⟩⦄,])", r"\1", text)


def layout_free(text: str) -> str:
    """Text up to layout: comments dropped, whitespace gone next to brackets, commas and colons, so the
    same tokens written on one line or five compare equal."""
    text = re.sub(r"\s+", " ", lex(text).blanked(COMMENTS)).strip()
    return re.sub(r" ?([()\[\]{}⟨⟩⦃⦄,:]) ?", r"\1", text)


def identifiers(text: str) -> set[str]:
    """The names `text` mentions outside comments and literals, and each dot-separated part of them."""
    code = lex(text).blanked(COMMENTS_AND_LITERALS)
    names = re.finditer(TOKEN_BEFORE + NAME.pattern, code)
    return {plain_name(part) for m in names for part in [m.group(), *m.group().split(".")]}


def find_tokens(text: str, words: tuple[str, ...], start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of each occurrence of one of `words` in `text[start:end]` that Lean reads as a token of
    its own: outside comments and literals, not part of a longer name."""
    code = lex(text).blanked(NOT_CODE)
    pattern = re.compile(TOKEN_BEFORE + "(?:" + "|".join(map(re.escape, words)) + ")" + TOKEN_AFTER)
    return [m.span() for m in pattern.finditer(code, start, len(code) if end is None else end)]


def closing_bracket(text: str, open_at: int = 0) -> int:
    """Offset of the bracket closing the one at `open_at`, or -1 when it is never closed."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] in OPENERS:
            depth += 1
        elif text[i] in CLOSERS:
            depth -= 1
            if depth == 0:
                return i
    return -1


def bracket_end(text: str, open_at: int) -> int:
    """Offset just past the bracket matching the one at `open_at` (the text's end if unmatched)."""
    close = closing_bracket(text, open_at)
    return len(text) if close < 0 else close + 1


def outside_brackets(text: str) -> str:
    """`text` with everything inside brackets blanked (same length), so a search sees only its top level."""
    out, depth = [], 0
    for c in text:
        if c in OPENERS:
            depth += 1
        out.append(c if depth == 0 else " ")
        if c in CLOSERS:
            depth = max(0, depth - 1)
    return "".join(out)


def skip_space(scan: str, i: int) -> int:
    """The first offset at or after `i` that holds no whitespace."""
    while i < len(scan) and scan[i].isspace():
        i += 1
    return i


@dataclass(frozen=True)
class Token:
    """One token of code: `kind` is `name` (a possibly dotted identifier or keyword, `«»` kept as written),
    `hash` (a `#` command such as `#eval`), `percent` (a name glued to `%`, the spelling of term elaborators
    such as `eval%`), `number` or `symbol`; `start` its offset and `line` its 1-based line."""

    text: str
    kind: str
    start: int
    line: int

    @property
    def plain(self) -> str:
        """The name without `«»` and without a leading `_root_.`: the constant it refers to."""
        name = plain_name(self.text)
        return name[len("_root_."):] if name.startswith("_root_.") else name


def code_tokens(text: str) -> list[Token]:
    """The tokens of `text` outside comments and literals, in order. A name is read whole (`Foo.axiom` is one
    token, not the keyword `axiom`), as Lean reads it; a number does not glue to a name after it (`2axiom` is
    `2` then `axiom`), and neither does a dot that follows no name (`(.run_cmd` has the keyword `run_cmd`)."""
    lexed = lex(text)
    code = lexed.blanked(COMMENTS_AND_LITERALS)
    escaped = {span.start - 1 for span in lexed.spans if span.kind == "escaped_ident"}
    tokens: list[Token] = []
    line, i, n = 1, 0, len(code)
    while i < n:
        c = code[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c.isspace():
            i += 1
            continue
        if c == "#":
            hashed = next((h for h in _HASH_TOKENS if code.startswith(h, i)), None)
            if hashed:
                tokens.append(Token(hashed, "hash", i, line))
                i += len(hashed)
                continue
        number = _NUMBER.match(code, i) if c.isdigit() else None
        if number:
            tokens.append(Token(number.group(), "number", i, line))
            i = number.end()
            continue
        name = _TOKEN_NAME.match(code, i) if (c.isalpha() or c == "_" or i in escaped) else None
        if name:
            end = name.end()
            if code.startswith("%", end) and "." not in name.group():
                tokens.append(Token(name.group() + "%", "percent", i, line))
                end += 1
            else:
                tokens.append(Token(name.group(), "name", i, line))
            line += name.group().count("\n")
            i = end
            continue
        j = i + 1
        # A bracket, or a character that reads as a digit or letter yet starts no number or name (`¹` of `⁻¹`), is
        # a token of its own; other symbols run on (`:=`, `=>`).
        if c not in BRACKETS and not c.isalnum():
            while j < n and not code[j].isspace() and code[j] not in BRACKETS and code[j] != "#" \
                    and not (code[j].isalnum() or code[j] in "_«"):
                j += 1
        tokens.append(Token(code[i:j], "symbol", i, line))
        i = j
    return tokens
