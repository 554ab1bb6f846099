"""Where each top-level command of Lean source starts, and where its text ends.

How commands are found, following Lean's grammar rather than layout:
- keywords that only ever start a command (`theorem`, `def`, `namespace`, `end`, `variable`, ...) start
  one wherever they stand as a token;
- `open`, `set_option`, `export` and the `#`-commands (`#print`, `#eval`, ...) are also written inside
  proofs (`open Real in simp`), so they start a command only as the first token of a line;
- docstrings, `@[...]` attributes, modifiers (`private`, `noncomputable`, ...) and `... in` prefixes
  (`open Real in`, `omit [h] in`) belong to the command they precede; an `... in` followed by no
  command is part of a term or tactic, unless it stands at column 0;
- nothing inside a syntax quotation (`` `(command| theorem $id ...) ``) or a name literal (`` `lemma ``) starts
  a command, and neither does a keyword right after an opening bracket, a comma or `:=` on its line
  (`syntax (name := lemma)`): a term goes on there.
A command runs to the start of the next one; trailing blank and comment-only lines are not part of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lean_pool.lean_source.lexer import NOT_CODE, QUOTED, Lexed, Span
from lean_pool.lean_source.tokens import (
    CLOSERS,
    HASH_COMMANDS,
    OPENERS,
    TOKEN_AFTER,
    TOKEN_BEFORE,
    bracket_end,
    normalize_space,
    plain_name,
    skip_space,
)

# Keywords that never occur inside a term or a tactic block: each starts a command wherever it stands.
COMMAND_KEYWORDS = (
    "theorem lemma def abbrev instance example structure class inductive opaque axiom "
    "namespace section end mutual universe variable import include omit attribute deriving "
    "initialize builtin_initialize macro macro_rules syntax elab elab_rules declare_syntax_cat "
    "notation notation3 infix infixl infixr prefix postfix simproc dsimproc alias irreducible_def "
    "add_decl_doc library_note suppress_compilation assert_not_exists run_cmd run_elab run_meta"
).split()
# Keywords that also open a term or a tactic (`open Real in`): commands only at the start of a line.
LINE_KEYWORDS = ("open", "set_option", "export")
MODIFIERS = ("private", "protected", "noncomputable", "partial", "nonrec", "unsafe", "scoped", "local")
_HEAD_WORDS = sorted([*COMMAND_KEYWORDS, *HASH_COMMANDS, *LINE_KEYWORDS, *MODIFIERS], key=len, reverse=True)
_HEAD = re.compile(r"/--|@\[|" + TOKEN_BEFORE + "(?:" + "|".join(_HEAD_WORDS) + ")" + TOKEN_AFTER)
_WORD = re.compile(r"#?[^\W\d][\w'!?]*")
# Commands that may be a prefix of the next one (`open Real in`, `omit [h] in`), or of a term or tactic.
_IN_PREFIXES = ("open", "set_option", "include", "omit", "variable")
_IN_PREFIX = re.compile("(?:" + "|".join(_IN_PREFIXES) + r")\b[^\n]*?" + TOKEN_BEFORE + r"in" + TOKEN_AFTER)
# Keywords read together with the word after them; those in `_ONLY_WITH_SECOND` are commands only then
# (`deriving Repr` after a structure is a clause of it, `deriving instance` a command).
_SECOND_WORDS = {
    "class": re.compile(r"\s+(inductive|abbrev)" + TOKEN_AFTER),
    "deriving": re.compile(r"\s+(instance)" + TOKEN_AFTER),
}
_ONLY_WITH_SECOND = frozenset({"deriving"})
# Tokens after which a term must follow: no command starts right after one on the same line.
_TERM_GOES_ON = (*OPENERS, ",", ":=")


@dataclass(frozen=True)
class Head:
    """Where a command starts (its first prefix), its keyword and where the keyword ends."""

    start: int
    keyword_at: int
    keyword_end: int
    kind: str
    modifiers: tuple[str, ...]
    attributes: tuple[str, ...]
    docstring: str
    prefixes: tuple[str, ...] = ()


def scan_text(lexed: Lexed) -> str:
    """The source with comments and literals blanked, doc comments kept as `/--` ... `-/` markers, and the
    insides of syntax quotations and name literals blanked too (`` `(command| theorem $id ...) `` and
    `` `lemma `` start no command). A quotation keeps its backticks and brackets and a name literal its
    backticks, so brackets still balance and a line ending in one still holds code."""
    chars = list(lexed.blanked(NOT_CODE))
    for span in lexed.spans:
        if span.kind == "comment" and lexed.source.startswith("/--", span.start) and span.end - span.start >= 5:
            chars[span.start : span.start + 3] = "/--"
            chars[span.end - 2 : span.end] = "-/"
    for span in lexed.spans:
        if span.kind in QUOTED:
            for i in _quoted_inside(lexed.source, span):
                if chars[i] != "\n":
                    chars[i] = " "
    return "".join(chars)


def _quoted_inside(source: str, span: Span) -> range:
    """The part of a quotation or name literal that is syntax held as data: after its backticks (and a
    quotation's opening bracket), before a quotation's closing bracket."""
    start = span.start + (2 if source.startswith("``", span.start) else 1)
    if span.kind == "quotation":
        return range(start + 1, span.end - 1)
    return range(start, span.end)


def _split_top_level(body: str) -> list[str]:
    entries, depth, start = [], 0, 0
    for i, c in enumerate(body):
        if c in OPENERS:
            depth += 1
        elif c in CLOSERS:
            depth -= 1
        elif c == "," and depth == 0:
            entries.append(body[start:i])
            start = i + 1
    entries.append(body[start:])
    return entries


def attribute_names(body: str) -> list[str]:
    """Attribute names in the body of `@[...]` / `attribute [...]` (`local`, `scoped`, `-` dropped)."""
    names = []
    for entry in _split_top_level(body):
        words = re.findall(r"[^\s\[\](),]+", plain_name(entry))
        while words and words[0] in ("local", "scoped", "-"):
            words = words[1:]
        if words:
            names.append(words[0].lstrip("-"))
    return names


def _line_start(scan: str, i: int) -> int:
    return scan.rfind("\n", 0, i) + 1


def first_on_line(scan: str, i: int) -> bool:
    """True when nothing but whitespace stands before offset `i` on its line."""
    return not scan[_line_start(scan, i) : i].strip()


def _read_head(source: str, scan: str, at: int) -> Head | None:
    """The command whose prefixes or keyword begin at `at`, or None when what stands there starts no command."""
    modifiers: list[str] = []
    attributes: list[str] = []
    docstring = ""
    i = at
    while i < len(scan):
        if scan.startswith("/--", i):
            if i > at:
                return None  # a second docstring: the first documents something else (a `library_note`)
            end = scan.find("-/", i + 3) + 2
            docstring = normalize_space(source[i + 3 : end - 2])
            i = skip_space(scan, end)
            continue
        if scan.startswith("@[", i):
            end = bracket_end(scan, i + 1)
            attributes += attribute_names(source[i + 2 : end - 1])
            i = skip_space(scan, end)
            continue
        word = _WORD.match(scan, i)
        if word is None:
            return None
        keyword = word.group()
        if keyword in MODIFIERS:
            modifiers.append(keyword)
            i = skip_space(scan, word.end())
            if keyword == "scoped" and scan.startswith("[", i):
                i = skip_space(scan, bracket_end(scan, i))
            continue
        line_keyword = keyword in LINE_KEYWORDS or keyword in HASH_COMMANDS
        if line_keyword and i == at and not first_on_line(scan, i):
            return None
        prefix = _IN_PREFIX.match(scan, i) if keyword in _IN_PREFIXES else None
        if prefix:
            following = _read_head(source, scan, skip_space(scan, prefix.end()))
            if following is not None:
                return Head(at, following.keyword_at, following.keyword_end, following.kind,
                             tuple(modifiers) + following.modifiers, tuple(attributes) + following.attributes,
                             following.docstring or docstring, (source[i : prefix.end()],) + following.prefixes)
            if line_keyword and _line_start(scan, i) != i:
                return None
        if not line_keyword and keyword not in COMMAND_KEYWORDS:
            return None
        end = word.end()
        if keyword in _SECOND_WORDS:
            second = _SECOND_WORDS[keyword].match(scan, end)
            if second is None and keyword in _ONLY_WITH_SECOND:
                return None
            if second is not None:
                keyword, end = f"{keyword} {second.group(1)}", second.end()
        return Head(at, i, end, keyword, tuple(modifiers), tuple(attributes), docstring)
    return None


def find_heads(source: str, scan: str) -> list[Head]:
    heads: list[Head] = []
    skip_until = 0
    for m in _HEAD.finditer(scan):
        if m.start() < skip_until or _continues_a_term(scan, m.start()):
            continue
        head = _read_head(source, scan, m.start())
        if head is None:
            continue
        heads.append(head)
        skip_until = _head_end(scan, head)
    return heads


def _continues_a_term(scan: str, at: int) -> bool:
    """True when what stands at `at` follows an opening bracket, a comma or `:=` on its line: a term goes on
    there, so a keyword is a name (`syntax (name := lemma) ...` declares the parser of `lemma`)."""
    return scan[_line_start(scan, at) : at].rstrip().endswith(_TERM_GOES_ON)


def _head_end(scan: str, head: Head) -> int:
    """Where the part of a command that may look like other commands ends: an `attribute`'s brackets
    (`attribute [instance] f`), a `library_note`'s docstring (`library_note "name"/-- text -/`)."""
    after = skip_space(scan, head.keyword_end)
    if head.kind == "attribute" and scan.startswith("[", after):
        return bracket_end(scan, after)
    if head.kind == "library_note" and scan.startswith('"', after):
        doc = skip_space(scan, scan.find('"', after + 1) + 1)
        if scan.startswith("/--", doc):
            return scan.find("-/", doc + 3) + 2
    return head.keyword_end


def code_end(scan: str, start: int, stop: int) -> int:
    """End of a command's text: the end of the last line in [start, stop) holding code, or `stop` if that
    line runs on into the next command."""
    last = len(scan[start:stop].rstrip()) + start
    if last <= start:
        return start
    line_end = scan.find("\n", last)
    return stop if line_end < 0 or line_end > stop else line_end
