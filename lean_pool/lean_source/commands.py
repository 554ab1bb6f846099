"""The one reader of Lean source: commands, their names, signatures and scopes, read the way Lean does.

Everything in Folklore that looks at Lean text (splitting LLM answers, the declaration index and dedup,
the verdict's statement comparison, the pool's header split, the simulators, the export) reads it here,
so they cannot disagree about where a command starts, what a declaration is called or what its statement
is. It sits on `lean_source.lexer`, which finds comments and literals: nothing inside them is taken for code.

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

import itertools
import math
import re
from bisect import bisect_right
from dataclasses import dataclass

from lean_pool.lean_source.lexer import (
    COMMENTS,
    COMMENTS_AND_LITERALS,
    NOT_CODE,
    QUOTED,
    Lexed,
    Span,
    lex,
)

DECLARATION_KINDS = frozenset(
    "theorem lemma def abbrev instance example structure class inductive opaque axiom".split()
    + ["class inductive", "class abbrev"]
)
THEOREM_KINDS = frozenset({"theorem", "lemma"})
SCOPE_KINDS = frozenset({"namespace", "section", "mutual"})
# Commands whose effect lasts to the end of the enclosing scope.
CONTEXT_KINDS = frozenset({"open", "universe", "variable", "set_option", "include", "omit", "export"})

# Keywords that never occur inside a term or a tactic block: each starts a command wherever it stands.
_COMMAND_KEYWORDS = (
    "theorem lemma def abbrev instance example structure class inductive opaque axiom "
    "namespace section end mutual universe variable import include omit attribute deriving "
    "initialize builtin_initialize macro macro_rules syntax elab elab_rules declare_syntax_cat "
    "notation notation3 infix infixl infixr prefix postfix simproc dsimproc alias irreducible_def "
    "add_decl_doc library_note suppress_compilation assert_not_exists run_cmd run_elab run_meta"
).split()
# Keywords that also open a term or a tactic (`open Real in`): commands only at the start of a line.
_LINE_KEYWORDS = ("open", "set_option", "export")
# Commands that print or test (`#s` alone is Mathlib's notation for a cardinality, not a command).
_HASH_COMMANDS = (
    "#check #check_failure #eval #print #reduce #exit #synth #guard_msgs #guard #help #lint #where #find "
    "#simp #norm_num #conv #adaptation_note #align #noalign #time #count_heartbeats #min_imports #explode"
).split()
_MODIFIERS = ("private", "protected", "noncomputable", "partial", "nonrec", "unsafe", "scoped", "local")
_NAMED_KINDS = DECLARATION_KINDS - {"example"}
_INDUCTIVE_KINDS = frozenset({"inductive", "class inductive"})

# Characters that continue an identifier: a keyword glued to one of these is part of a name.
_ID_CHARS = r"\w'!?\u2080-\u209c\u1d62-\u1d6a"
_TOKEN_BEFORE = rf"(?<![{_ID_CHARS}.«»])"
_TOKEN_AFTER = rf"(?![{_ID_CHARS}])"
_HEAD_WORDS = sorted([*_COMMAND_KEYWORDS, *_HASH_COMMANDS, *_LINE_KEYWORDS, *_MODIFIERS], key=len, reverse=True)
_HEAD = re.compile(r"/--|@\[|" + _TOKEN_BEFORE + "(?:" + "|".join(_HEAD_WORDS) + ")" + _TOKEN_AFTER)
_WORD = re.compile(r"#?[^\W\d][\w'!?]*")
_NAME_PART = rf"(?:«[^»\n]*»|[^\W\d][{_ID_CHARS}]*)"
_NAME = re.compile(rf"{_NAME_PART}(?:\.{_NAME_PART})*")
_PRIORITY = re.compile(r"\s*\(\s*priority\s*:=[^)]*\)")
_UNIVERSE_PARAMS = re.compile(r"\.\{[^{}]*\}")
_NOT_NAMES = frozenset(_COMMAND_KEYWORDS + list(_LINE_KEYWORDS) + list(_MODIFIERS)) | {"where", "extends", "in", "with"}
# Commands that may be a prefix of the next one (`open Real in`, `omit [h] in`), or of a term or tactic.
_IN_PREFIXES = ("open", "set_option", "include", "omit", "variable")
_IN_PREFIX = re.compile("(?:" + "|".join(_IN_PREFIXES) + r")\b[^\n]*?" + _TOKEN_BEFORE + r"in" + _TOKEN_AFTER)
# Keywords read together with the word after them; those in `_ONLY_WITH_SECOND` are commands only then
# (`deriving Repr` after a structure is a clause of it, `deriving instance` a command).
_SECOND_WORDS = {
    "class": re.compile(r"\s+(inductive|abbrev)" + _TOKEN_AFTER),
    "deriving": re.compile(r"\s+(instance)" + _TOKEN_AFTER),
}
_ONLY_WITH_SECOND = frozenset({"deriving"})
_BINDS_NEXT_ASSIGN = re.compile(_TOKEN_BEFORE + r"(?:let|have|haveI|letI)" + _TOKEN_AFTER)
_WHERE = re.compile(_TOKEN_BEFORE + r"where" + _TOKEN_AFTER)
_IMPORT = re.compile(r"import" + _TOKEN_AFTER + r"\s+(\S+)")
_OPENERS = "([{⟨⦃⟪"
_CLOSERS = ")]}⟩⦄⟫"
# Tokens after which a term must follow: no command starts right after one on the same line.
_TERM_GOES_ON = (*_OPENERS, ",", ":=")


@dataclass(frozen=True)
class Scope:
    """An open `namespace`, `section` or `mutual` block, or the file itself (kind `file`, always first):
    `name` as written, `«»` kept (`""` for anonymous ones), `opener` the source of the command that opened it
    (`""` for the file), `context` the context commands issued in it so far."""

    kind: str
    name: str
    opener: str
    context: tuple[Command, ...]

    @property
    def closer(self) -> str:
        """The `end` line that closes this scope."""
        return f"end {self.name}".rstrip()


@dataclass(frozen=True)
class Command:
    """One top-level command.

    `kind` is its keyword (`theorem`, `open`, `#print`, `class inductive`, ...); `name` the full name it
    declares (namespaces resolved, `_root_.` and `«»` removed; for `namespace` the namespace, for `section`
    and `end` the name written after them; empty otherwise); `signature` a declaration's binders and type,
    whitespace normalized (a `let ... :=` inside the type belongs to it); `line` the 1-based line of the
    keyword; `text` the exact source, from its docstring or attributes to its last line of code.
    `attributes` are the names in its `@[...]` (for an `attribute` command, in its brackets); `prefixes`
    the `open ... in`, `variable ... in`, `include ... in` ... written before it, as written; `scopes` the
    scopes open where it stands, outermost first, each with the context commands in force; `balanced`
    is False when a declaration's signature has unmatched brackets. Offsets (`start`, `end`, `keyword_at`,
    `keyword_end`, `name_at`) index the source given to `read_commands`.
    """

    kind: str
    name: str
    signature: str
    line: int
    text: str
    start: int
    end: int
    keyword_at: int
    keyword_end: int
    name_at: int
    written_name: str
    modifiers: tuple[str, ...]
    attributes: tuple[str, ...]
    docstring: str
    prefixes: tuple[str, ...]
    balanced: bool
    scopes: tuple[Scope, ...]

    def context(self, kinds: frozenset[str] = CONTEXT_KINDS) -> list[Command]:
        """The context commands of the given kinds in force here, outermost scope first."""
        return [command for scope in self.scopes for command in scope.context if command.kind in kinds]


def namespace_of(scopes: tuple[Scope, ...] | list[Scope]) -> str:
    """The namespace that a stack of scopes puts declarations in (sections add nothing)."""
    parts = [part for scope in scopes if scope.kind == "namespace" for part in scope.name.split(".") if part]
    return plain_name(".".join(parts))


def plain_name(name: str) -> str:
    """A name without `«»` escapes."""
    return name.replace("«", "").replace("»", "")


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
    names = re.finditer(_TOKEN_BEFORE + _NAME.pattern, code)
    return {plain_name(part) for m in names for part in [m.group(), *m.group().split(".")]}


def find_tokens(text: str, words: tuple[str, ...], start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of each occurrence of one of `words` in `text[start:end]` that Lean reads as a token of
    its own: outside comments and literals, not part of a longer name."""
    code = lex(text).blanked(NOT_CODE)
    pattern = re.compile(_TOKEN_BEFORE + "(?:" + "|".join(map(re.escape, words)) + ")" + _TOKEN_AFTER)
    return [m.span() for m in pattern.finditer(code, start, len(code) if end is None else end)]


def leading_imports(text: str) -> tuple[list[str], int]:
    """The modules imported at the head of `text`, and the offset where what follows them begins.

    Lean allows only whitespace and comments before and among the imports. Doc comments (`/--`, `/-!`)
    are syntax that belongs to what follows, and an unterminated comment is left for Lean to report,
    so neither is skipped."""
    modules, _, body_start = _imports(text)
    return modules, body_start


def without_imports(text: str) -> tuple[list[str], str]:
    """The modules imported at the head of `text`, and `text` without its `import` lines (comments kept)."""
    modules, spans, _ = _imports(text)
    pieces, pos = [], 0
    for start, end in spans:
        pieces.append(text[pos:start])
        pos = end
    return modules, "".join(pieces) + text[pos:]


def without_repeated(code: str, known: str) -> str:
    """`code` without the commands `known` already has, equal up to layout: models copy a file's header or
    environment into their answers, and a repair copies the attempt before it, so without this each copy would
    stay in the file. Everything else, comments included, stays as written; no run of blank lines is left
    where a command went, and the result has no blank lines around it."""
    seen = {layout_free(command.text) for command in read_commands(known)}
    pieces, position = [], 0
    for command in read_commands(code):
        if layout_free(command.text) in seen:
            pieces.append(code[position : command.start].rstrip(" \t"))
            position = command.end
    kept = "\n".join(line.rstrip() for line in "".join([*pieces, code[position:]]).split("\n"))
    while "\n\n\n" in kept:
        kept = kept.replace("\n\n\n", "\n\n")
    return kept.strip("\n")


def _imports(text: str) -> tuple[list[str], list[tuple[int, int]], int]:
    """The leading imports' modules, the span of each `import` (to its line's end when only a comment
    follows it there), and where the text after them begins."""
    lexed = lex(text)
    comments = {span.start: span for span in lexed.spans if span.kind == "comment"}
    modules: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = _skip_space(text, 0)
    while pos < len(text):
        comment = comments.get(pos)
        if comment is not None:
            body = text[comment.start : comment.end]
            plain = body.startswith("--") or (
                not body.startswith(("/--", "/-!")) and len(body) >= 4 and body.endswith("-/")
            )
            if not plain:
                break
            pos = _skip_space(text, comment.end)
            continue
        keyword = _IMPORT.match(text, pos)
        if keyword is None:
            break
        modules.append(keyword.group(1))
        line_end = text.find("\n", keyword.end())
        line_end = len(text) if line_end < 0 else line_end
        rest = text[keyword.end() : line_end].strip()
        spans.append((keyword.start(), line_end if not rest or rest.startswith("--") else keyword.end()))
        pos = _skip_space(text, keyword.end())
    return modules, spans, pos


# ---------------------------------------------------------------------------------------------------------
# Finding commands.
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Head:
    """Where a command starts (its first prefix), its keyword and where the keyword ends."""

    start: int
    keyword_at: int
    keyword_end: int
    kind: str
    modifiers: tuple[str, ...]
    attributes: tuple[str, ...]
    docstring: str
    prefixes: tuple[str, ...] = ()


def _scan_text(lexed: Lexed) -> str:
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


def _matching(text: str, open_at: int = 0) -> int:
    """Offset of the bracket closing the one at `open_at`, or -1 when it is never closed."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] in _OPENERS:
            depth += 1
        elif text[i] in _CLOSERS:
            depth -= 1
            if depth == 0:
                return i
    return -1


def _bracket_end(text: str, open_at: int) -> int:
    """Offset just past the bracket matching the one at `open_at` (the text's end if unmatched)."""
    close = _matching(text, open_at)
    return len(text) if close < 0 else close + 1


def _split_top_level(body: str) -> list[str]:
    entries, depth, start = [], 0, 0
    for i, c in enumerate(body):
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
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


def _skip_space(scan: str, i: int) -> int:
    while i < len(scan) and scan[i].isspace():
        i += 1
    return i


def _line_start(scan: str, i: int) -> int:
    return scan.rfind("\n", 0, i) + 1


def _first_on_line(scan: str, i: int) -> bool:
    return not scan[_line_start(scan, i) : i].strip()


def _read_head(source: str, scan: str, at: int) -> _Head | None:
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
            i = _skip_space(scan, end)
            continue
        if scan.startswith("@[", i):
            end = _bracket_end(scan, i + 1)
            attributes += attribute_names(source[i + 2 : end - 1])
            i = _skip_space(scan, end)
            continue
        word = _WORD.match(scan, i)
        if word is None:
            return None
        keyword = word.group()
        if keyword in _MODIFIERS:
            modifiers.append(keyword)
            i = _skip_space(scan, word.end())
            if keyword == "scoped" and scan.startswith("[", i):
                i = _skip_space(scan, _bracket_end(scan, i))
            continue
        line_keyword = keyword in _LINE_KEYWORDS or keyword in _HASH_COMMANDS
        if line_keyword and i == at and not _first_on_line(scan, i):
            return None
        prefix = _IN_PREFIX.match(scan, i) if keyword in _IN_PREFIXES else None
        if prefix:
            following = _read_head(source, scan, _skip_space(scan, prefix.end()))
            if following is not None:
                return _Head(at, following.keyword_at, following.keyword_end, following.kind,
                             tuple(modifiers) + following.modifiers, tuple(attributes) + following.attributes,
                             following.docstring or docstring, (source[i : prefix.end()],) + following.prefixes)
            if line_keyword and _line_start(scan, i) != i:
                return None
        if not line_keyword and keyword not in _COMMAND_KEYWORDS:
            return None
        end = word.end()
        if keyword in _SECOND_WORDS:
            second = _SECOND_WORDS[keyword].match(scan, end)
            if second is None and keyword in _ONLY_WITH_SECOND:
                return None
            if second is not None:
                keyword, end = f"{keyword} {second.group(1)}", second.end()
        return _Head(at, i, end, keyword, tuple(modifiers), tuple(attributes), docstring)
    return None


def _heads(source: str, scan: str) -> list[_Head]:
    heads: list[_Head] = []
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


def _head_end(scan: str, head: _Head) -> int:
    """Where the part of a command that may look like other commands ends: an `attribute`'s brackets
    (`attribute [instance] f`), a `library_note`'s docstring (`library_note "name"/-- text -/`)."""
    after = _skip_space(scan, head.keyword_end)
    if head.kind == "attribute" and scan.startswith("[", after):
        return _bracket_end(scan, after)
    if head.kind == "library_note" and scan.startswith('"', after):
        doc = _skip_space(scan, scan.find('"', after + 1) + 1)
        if scan.startswith("/--", doc):
            return scan.find("-/", doc + 3) + 2
    return head.keyword_end


def _code_end(scan: str, start: int, stop: int) -> int:
    """End of a command's text: the end of the last line in [start, stop) holding code, or `stop` if that
    line runs on into the next command."""
    last = len(scan[start:stop].rstrip()) + start
    if last <= start:
        return start
    line_end = scan.find("\n", last)
    return stop if line_end < 0 or line_end > stop else line_end


# ---------------------------------------------------------------------------------------------------------
# Reading one command.
# ---------------------------------------------------------------------------------------------------------


def _body_start(scan: str, start: int, stop: int, constructors: bool) -> int:
    """Where a declaration's body begins: its top-level `:=` (one not taken by a `let`/`have` inside the
    statement), `where`, or an equation or constructor `|` opening a line (see `_is_equation`); `stop` if
    there is none."""
    depth = 0
    pending = 0
    i = start
    while i < stop:
        c = scan[i]
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth = max(0, depth - 1)
        elif depth == 0 and scan.startswith(":=", i):
            if pending == 0:
                return i
            pending -= 1
            i += 1
        elif depth == 0 and _BINDS_NEXT_ASSIGN.match(scan, i):
            pending += 1
        elif depth == 0 and (_WHERE.match(scan, i) or _is_equation(scan, i, constructors)):
            return i
        i += 1
    return stop


def _is_equation(scan: str, i: int, constructors: bool) -> bool:
    """True for a `|` opening a line of an inductive type's constructors (when `constructors`), or of a
    pattern-matching definition: `| 0, _ => ...`, whose `=>` stands outside brackets and before any `|`
    closing an absolute value (`|(fun y => y) x| ≥ 0` is part of a type)."""
    if scan[i] != "|" or not _first_on_line(scan, i):
        return False
    if constructors:
        return True
    depth = 0
    for j in range(i + 1, len(scan)):
        c = scan[j]
        if c == "\n" or (c == "|" and depth == 0):
            return False
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
        elif depth == 0 and scan.startswith("=>", j):
            return True
    return False


def _balanced(text: str) -> bool:
    return sum(map(text.count, _OPENERS)) == sum(map(text.count, _CLOSERS))


def _written_name(scan: str, names: str, at: int) -> tuple[str, int, int]:
    """The name written after `at` (past an optional `(priority := n)`), its offset and where it ends
    (universe parameters `.{u}` are not part of it); ("", -1, at) when no name follows."""
    priority = _PRIORITY.match(scan, at)
    at = priority.end() if priority else at
    start = _skip_space(scan, at)
    m = _NAME.match(names, start)
    if m is None or m.group() in _NOT_NAMES:
        return "", -1, at
    return m.group(), start, m.end()


def _full_name(scopes: list[Scope], name: str) -> str:
    if name.startswith("_root_."):
        return plain_name(name[len("_root_.") :])
    return plain_name(".".join(filter(None, [namespace_of(scopes), name])))


def read_commands(text: str) -> list[Command]:
    """Every top-level command of `text`, in order, with names, signatures and the scopes around it.

    Never raises: text it cannot read (an unterminated comment, an unbalanced signature) still yields
    commands, with `balanced=False` where brackets do not match; callers decide what to skip.
    """
    lexed = lex(text)
    scan = _scan_text(lexed)
    names = lexed.blanked(COMMENTS_AND_LITERALS)
    uncommented = lexed.blanked(COMMENTS)
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    heads = _heads(text, scan)
    scopes = [Scope("file", "", "", ())]
    commands: list[Command] = []
    for index, head in enumerate(heads):
        stop = heads[index + 1].start if index + 1 < len(heads) else len(text)
        end = _code_end(scan, head.start, stop)
        name, name_at, name_end = "", -1, head.keyword_end
        if head.kind in _NAMED_KINDS or head.kind in ("namespace", "section", "end"):
            name, name_at, name_end = _written_name(scan, names, head.keyword_end)
        signature, balanced = "", True
        if head.kind in DECLARATION_KINDS:
            body = _body_start(scan, name_end, end, head.kind in _INDUCTIVE_KINDS)
            signature, balanced = normalize_space(uncommented[name_end:body]), _balanced(scan[name_end:body])
        command = Command(
            kind=head.kind,
            name=_full_name(scopes, name) if name and head.kind in _NAMED_KINDS | {"namespace"} else plain_name(name),
            signature=signature, line=bisect_right(line_starts, head.keyword_at), text=text[head.start : end],
            start=head.start, end=end, keyword_at=head.keyword_at, keyword_end=head.keyword_end, name_at=name_at,
            written_name=name, modifiers=head.modifiers, attributes=_attributes(text, scan, head),
            docstring=head.docstring, prefixes=head.prefixes, balanced=balanced, scopes=tuple(scopes),
        )
        commands.append(command)
        _update_scopes(scopes, command)
    return commands


def _attributes(text: str, scan: str, head: _Head) -> tuple[str, ...]:
    """The attribute names of a command: those of its `@[...]`, or for `attribute [...]` those in its brackets."""
    bracket = _skip_space(scan, head.keyword_end)
    if head.kind == "attribute" and scan.startswith("[", bracket):
        return tuple(attribute_names(text[bracket + 1 : _bracket_end(scan, bracket) - 1]))
    return head.attributes


def _update_scopes(scopes: list[Scope], command: Command) -> None:
    """Follow Lean's scoping: `namespace`/`section`/`mutual` open a scope, `end` closes the innermost
    (as many namespace parts as its name has), context commands join the innermost scope. The file's
    own scope, first in the list, is never closed."""
    if command.kind in SCOPE_KINDS:
        scopes.append(Scope(command.kind, command.written_name, command.text, ()))
    elif command.kind == "end":
        count = len(command.name.split(".")) if command.name else 1
        while count > 0 and len(scopes) > 1:
            top = scopes.pop()
            parts = top.name.split(".")
            if len(parts) > count:
                rest = ".".join(parts[: len(parts) - count])
                scopes.append(Scope(top.kind, rest, f"{top.kind} {rest}", top.context))
            count -= len(parts)
    elif command.kind in CONTEXT_KINDS:
        top = scopes[-1]
        scopes[-1] = Scope(top.kind, top.name, top.opener, top.context + (command,))


# ---------------------------------------------------------------------------------------------------------
# Statements: a signature up to the ways of writing it that do not change what it says.
# ---------------------------------------------------------------------------------------------------------

_IDENT = r"[^\W\d][\w'₀-₉]*"
_BINDER_GROUP = re.compile(rf"(?P<open>[({{⦃\[])\s*(?P<names>(?:{_IDENT}\s+)*{_IDENT})\s*:(?!=)")
# A binder group of names alone (`{α}`, `(x y)`): their types are left to Lean, the names are still bound.
_UNTYPED_GROUP = re.compile(rf"(?P<open>[({{⦃])\s*(?P<names>(?:{_IDENT}\s+)*{_IDENT})\s*[)}}⦄]")
# Names a binder notation binds, up to its type, body, or binder predicate (`∀ ε > 0,`, `∃ x ∈ s,`).
_QUANTIFIED = re.compile(rf"(?:∀|∃!?|fun|⋃|⋂|∑|∏)\s+(?P<names>(?:{_IDENT}\s*)+?)\s*(?=[:,]|=>|[∈∉⊆⊂<>≤≥≠])")
_CLOSING = {"(": ")", "{": "}", "⦃": "⦄", "[": "]"}
# Spellings Lean reads as one: `↦` is `=>`, `λ` is `fun`; universe levels (`Type u`, `Type _`, `Sort v`,
# `Category.{v}`) only say how general a statement is in ways no restatement is judged by.
_SAME_TOKEN = (("↦", "=>"), ("λ", "fun"))
_UNIVERSE = re.compile(rf"\b(Type|Sort)(?:\*|\s+_|\s+{_IDENT}|\s+\(max [^()]*\))(?![\w'])")
# What makes an arrow in a conclusion not its outermost connective: `↔` binds looser than `→`, and a
# binder or a comma before it means the arrow belongs to a body. Such conclusions are left as written.
_LOOSER = re.compile(r"↔|,|=>|<\||\$|[∀∃∑∏⋃⋂⨆⨅∫∮]|(?<![\w'.])(?:fun|let|have|show|if|match|by|do)(?![\w'])")
_ARROW = " → "
_BINDER_START = re.compile(r"[∀∃∑∏⋃⋂⨆⨅∫∮]|(?:fun|let|have)(?![\w'])")
_FRESH = "_premise"


def leading_binders(signature: str) -> tuple[list[str], str]:
    """The bracketed binder groups a signature starts with, and the rest (`: type` or more binders)."""
    groups = []
    rest = signature.strip()
    while rest[:1] in _CLOSING:
        close = _matching(rest)
        if close < 0:
            break
        groups.append(rest[: close + 1])
        rest = rest[close + 1 :].lstrip()
    return groups, rest


def _expand_group(group: str) -> list[str]:
    """`(a b : T)` -> `(a : T) (b : T)`, `{α β}` -> `{α} {β}`, `[inst : C]` -> `[C]`, `(h : (P))` -> `(h : P)`:
    binder groups Lean reads the same way."""
    untyped = _UNTYPED_GROUP.fullmatch(group)
    if untyped:
        opener = untyped.group("open")
        return [f"{opener}{name}{_CLOSING[opener]}" for name in untyped.group("names").split()]
    m = _BINDER_GROUP.match(group)
    if m is None:
        return [group]
    opener, body = m.group("open"), group[m.end() : -1].strip()
    if opener == "[":
        return [f"[{body}]"]
    body = _unwrap(body)
    return [f"{opener}{name} : {body}{_CLOSING[opener]}" for name in m.group("names").split()]


def _outside_brackets(text: str) -> str:
    """`text` with everything inside brackets blanked (same length), so a search sees only its top level."""
    out, depth = [], 0
    for c in text:
        if c in _OPENERS:
            depth += 1
        out.append(c if depth == 0 else " ")
        if c in _CLOSERS:
            depth = max(0, depth - 1)
    return "".join(out)


def _unwrap(term: str) -> str:
    """A term without parentheses around the whole of it, unless they make a tuple (`(a, b)`), a type
    ascription (`(x : T)`) or a `·` function (`(· + 1)`); the comma and colon of a binder (`(∀ x : T, P)`)
    are its own."""
    while term.startswith("(") and _matching(term) == len(term) - 1:
        inner = term[1:-1].strip()
        top = _outside_brackets(inner)
        if not inner or "·" in top or (not _BINDER_START.match(inner) and any(c in top for c in ",:")):
            break
        term = inner
    return term


def _forall_binders(body: str) -> tuple[list[str], str] | None:
    """`∀ x y : T, P` / `∀ (x : T) {y : U}, P` / `∀ x, P` as binder groups and `P`; None for binder
    predicates (`∀ x ∈ s, P`) and anything else it cannot read whole."""
    if not body.startswith("∀ ") and not body.startswith("∀("):
        return None
    comma = _outside_brackets(body).find(",")
    if comma < 0:
        return None
    binders, rest = body[1:comma].strip(), body[comma + 1 :].strip()
    groups, left = leading_binders(binders)
    if groups and not left:
        return groups, rest
    plain = re.fullmatch(rf"(?P<names>(?:{_IDENT}\s+)*{_IDENT})(?:\s*:\s*(?P<type>.+))?", binders)
    if groups or plain is None or not rest:
        return None
    names = plain.group("names").split()
    kind = plain.group("type")
    return [f"({name} : {kind})" if kind else f"({name})" for name in names], rest


def _premise(body: str) -> tuple[str, str] | None:
    """`P → Q` as (`P`, `Q`) when that arrow is the outermost connective of the conclusion, else None."""
    top = _outside_brackets(body)
    arrow = top.find(_ARROW)
    if arrow < 0 or _LOOSER.search(top[:arrow]) or "↔" in top:
        return None
    return body[:arrow].strip(), body[arrow + len(_ARROW) :].strip()


def _intro_conclusion(groups: list[str], rest: str) -> tuple[list[str], str]:
    """Leading `∀` binders and premises of the conclusion moved before the colon: `(h : P) : Q`,
    `: P → Q` and `: ∀ h : P, Q` are one statement, written three ways."""
    groups = list(groups)
    fresh = _FRESH
    while fresh in rest or any(fresh in g for g in groups):
        fresh += "_"
    while rest.startswith(":"):
        body = _unwrap(rest[1:].strip())
        quantified = _forall_binders(body)
        if quantified is not None:
            groups.extend(quantified[0])
            rest = f": {quantified[1]}"
            continue
        split = _premise(body)
        if split is None or not split[1]:
            return groups, f": {body}"
        premise, conclusion = split
        binder, after = leading_binders(premise)
        if len(binder) == 1 and not after and (_BINDER_GROUP.match(premise) or premise.startswith("[")):
            groups.append(premise)
        else:
            groups.append(f"({fresh}{len(groups)} : {_unwrap(premise)})")
        rest = f": {conclusion}"
    return groups, rest


def _bound_names(groups: list[str], text: str) -> list[str]:
    """The names a statement binds (binder groups, untyped leading groups `groups`, quantifiers, `fun`),
    in the order they first appear in `text`."""
    found = [(m.start(), m.group("names")) for pattern in (_BINDER_GROUP, _QUANTIFIED) for m in pattern.finditer(text)]
    offset = 0
    for group in groups:
        untyped = _UNTYPED_GROUP.fullmatch(group)
        if untyped:
            found.append((offset, untyped.group("names")))
        offset += len(group) + 1
    bound: list[str] = []
    for _, names in sorted(found):
        bound.extend(n for n in names.split() if n not in bound and n != "_")
    return bound


def _statement_binders(text: str) -> tuple[list[str], str]:
    """A signature's binder groups, one binder each, with the hypotheses and `∀` binders of its conclusion moved
    before the colon, and what is left (`: conclusion`): tokens Lean reads as one made one, universe levels erased."""
    for spelling, token in _SAME_TOKEN:
        text = text.replace(spelling, token)
    text = _UNIVERSE_PARAMS.sub("", _UNIVERSE.sub(r"\1*", text))
    groups, rest = _intro_conclusion(*leading_binders(text))
    return [g for group in groups for g in _expand_group(group)], rest


def canonical_statement(signature: str) -> str:
    """A statement's signature up to layout, binder grouping, the names of its bound variables, hypotheses
    written before or after the colon, universe levels and redundant parentheses: two restatements that
    differ only in those give the same text (the exact tier of dedup)."""
    expanded, rest = _statement_binders(normalize_space(signature))
    text = " ".join(expanded + [rest]).strip()
    bound = _bound_names(expanded, text)
    if not bound:
        return text
    fresh = {name: f"x{i}" for i, name in enumerate(bound, 1)}
    names = "|".join(re.escape(n) for n in sorted(bound, key=len, reverse=True))
    return re.sub(rf"(?<![\w'.])(?:{names})(?![\w'!?₀-₉])", lambda m: fresh[m.group()], text)


# ---------------------------------------------------------------------------------------------------------
# Statements up to the order of their hypotheses: the keys benchmark decontamination compares.
# ---------------------------------------------------------------------------------------------------------

# Binders of equal standing whose orders are all tried to find the one smallest text; past this many orders,
# those still tied are taken in the order the conclusion first mentions them.
_MAX_ORDERINGS = 720
# Comparisons Lean defines as their mirror image (`a ≥ b` is `b ≤ a` by definition, reducibly).
_MIRRORED = {"≥": "≤", ">": "<"}
# Relations at the precedence of a comparison: a conjunct holding two of them is left as written.
_RELATIONS = frozenset({"≥", ">", "≤", "<", "=", "≠", "∣", "∈", "∉", "⊆", "⊂", "≡", "↔", "→", "∨", "⁻"})
# Words that open a term running to the end of a conjunct: what follows them is not flipped.
_TERM_OPENERS = frozenset({"∀", "∃", "∃!", "fun", "¬", "let", "have", "if", "match", "∑", "∏", "⋃", "⋂", ","})
_QUANTIFIER = re.compile(r"(?<![\w'.])(∀|∃)(?!!)(?=[\s(\[{⦃])")
_PLAIN_BINDERS = re.compile(rf"(?P<names>(?:{_IDENT}\s+)*{_IDENT})(?:\s*:\s*(?P<type>.+))?")


@dataclass(frozen=True)
class _Binder:
    """One binder of a statement: its bracket, its name (`""` for an instance) and its type (`""` when untyped)."""

    opener: str
    name: str
    type: str


def _read_binder(group: str) -> _Binder:
    """A single binder group (`(x : T)`, `{α}`, `[C]`) as its parts."""
    opener = group[0]
    if opener == "[":
        return _Binder("[", "", group[1:-1].strip())
    untyped = _UNTYPED_GROUP.fullmatch(group)
    if untyped:
        return _Binder(opener, untyped.group("names"), "")
    m = _BINDER_GROUP.match(group)
    if m is None:
        return _Binder("[", "", group)
    return _Binder(opener, m.group("names"), group[m.end() : -1].strip())


def _nested_quantifiers(text: str) -> str:
    """`∀ x y : T, P`, `∀ (x : T) (y : T), P` and `∀ x : T, ∀ y : T, P` as the last, one binder per quantifier (and
    the same for `∃`): Lean expands the first two into the third. Binder predicates (`∀ n ≥ 5,`) stay as written."""
    out, position = [], 0
    for m in _QUANTIFIER.finditer(text):
        if m.start() < position:
            continue
        comma = _outside_brackets(text[m.end() :]).find(",")
        if comma < 0:
            continue
        section = text[m.end() : m.end() + comma].strip()
        groups, left = leading_binders(section)
        if groups and not left:
            binders = [_read_binder(g) for group in groups for g in _expand_group(group)]
            if any(not b.name for b in binders):
                continue
            singles = [f"{b.name} : {b.type}" if b.type else b.name for b in binders]
        else:
            plain = _PLAIN_BINDERS.fullmatch(section)
            if plain is None:
                continue
            kind = plain.group("type")
            singles = [f"{name} : {kind}" if kind else name for name in plain.group("names").split()]
        quantifier = m.group(1)
        out.append(text[position : m.start()] + " ".join(f"{quantifier} {single}," for single in singles))
        position = m.end() + comma + 1
    return "".join(out) + text[position:]


def _lean3_lambdas(tokens: list[str]) -> list[str]:
    """`fun x, e` (Lean 3's spelling, and `λ x, e`) as `fun x => e`: the first comma at the binders' depth."""
    tokens = list(tokens)
    for i, token in enumerate(tokens):
        if token != "fun":
            continue
        depth = 0
        for j in range(i + 1, len(tokens)):
            if tokens[j] in _OPENERS:
                depth += 1
            elif tokens[j] in _CLOSERS:
                depth -= 1
                if depth < 0:
                    break
            elif depth == 0 and tokens[j] in (",", "=>"):
                tokens[j] = "=>"
                break
    return tokens


def _without_namespaces(tokens: list[str], opened: frozenset[str]) -> list[str]:
    """Names written with the prefix of an opened namespace (`Real.sin` under `open Real`) without it."""
    if not opened:
        return tokens
    out = []
    for token in tokens:
        parts = token.split(".")
        cut = next((k for k in range(len(parts) - 1, 0, -1) if ".".join(parts[:k]) in opened), 0)
        out.append(".".join(parts[cut:]))
    return out


def _notation_free(text: str, opened: frozenset[str]) -> str:
    """`text` up to the spellings Lean reads as one term: spacing between tokens (`x^2`, `x ^ 2`), `λ` and Lean 3's
    `fun x,`, nested quantifiers or one with several binders, and namespaces the statement's file opens."""
    tokens = _without_namespaces(_lean3_lambdas(_notation_tokens(text)), opened)
    return _nested_quantifiers(normalize_space(" ".join(tokens)))


# Spellings Lean's notation reads as one symbol: `↦`/`=>`, `λ`/`fun` and the ASCII forms of relations and arrows.
_SAME_SYMBOL = {**dict(_SAME_TOKEN), "->": "→", "<->": "↔", "<=": "≤", ">=": "≥", "!=": "≠", "√": "Real.sqrt"}
# Big operators whose `x in s` binder is the older spelling of `x ∈ s`.
_BIG_OPERATORS = frozenset({"∑", "∏"})
# Symbols of more than one character that statements use and that the rules below look for; any other run of
# symbol characters (`|^` in `|x|^2`) is read one character at a time, as the same symbols written apart are.
_KEPT_SYMBOLS = frozenset({"=>", ":=", "..", "::", "<|", "|>", *_SAME_SYMBOL})


def _notation_tokens(text: str) -> list[str]:
    """The tokens of `text`, symbols apart however they are spaced and in one spelling each (`√x` as `Real.sqrt x`,
    `∑ i in s,` as `∑ i ∈ s,`)."""
    words: list[str] = []
    for token in code_tokens(text):
        if token.kind == "symbol" and token.text not in _KEPT_SYMBOLS:
            words += list(token.text)
        else:
            words.append(token.text)
    words = [_SAME_SYMBOL.get(word, word) for word in words]
    for i, word in enumerate(words):
        if word in _BIG_OPERATORS:
            binder = next((j for j in range(i + 1, len(words)) if words[j] in (",", "in", "∈")), None)
            if binder is not None and words[binder] == "in":
                words[binder] = "∈"
    return words


def _unparenthesized(tokens: list[str]) -> list[str]:
    """Parentheses around one token dropped: `(x)` is `x`."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "(" and i + 2 < len(tokens) and tokens[i + 2] == ")" and tokens[i + 1] not in _BRACKETS:
            out.append(tokens[i + 1])
            i += 3
            continue
        out.append(tokens[i])
        i += 1
    return out


def _mirrored_comparisons(tokens: list[str]) -> list[str]:
    """Each conjunct `a ≥ b` / `a > b` of a proposition as `b ≤ a` / `b < a`, when the comparison is the conjunct's
    only relation outside brackets; anything else stays as written."""
    conjuncts: list[list[str]] = [[]]
    depth = 0
    for token in tokens:
        depth += (token in _OPENERS) - (token in _CLOSERS)
        if depth == 0 and token == "∧":
            conjuncts.append([])
        else:
            conjuncts[-1].append(token)
    flipped = []
    for conjunct in conjuncts:
        depth, top = 0, []
        for i, token in enumerate(conjunct):
            if depth == 0:
                top.append((i, token))
            depth += (token in _OPENERS) - (token in _CLOSERS)
        relations = [(i, t) for i, t in top if t in _RELATIONS]
        opens_a_term = any(t in _TERM_OPENERS for _, t in top)
        if len(relations) == 1 and relations[0][1] in _MIRRORED and not opens_a_term:
            at, relation = relations[0]
            conjunct = [*conjunct[at + 1 :], _MIRRORED[relation], *conjunct[:at]]
        flipped.append(conjunct)
    return [token for k, conjunct in enumerate(flipped) for token in ([*(["∧"] if k else []), *conjunct])]


@dataclass(frozen=True)
class _Piece:
    """A binder's type or the conclusion, as text pieces and `(name,)` marks where a statement's binder is named."""

    parts: tuple[str | tuple[str], ...]

    def render(self, naming: dict[str, str]) -> str:
        return "".join(part if isinstance(part, str) else naming[part[0]] for part in self.parts).strip()

    def mentions(self, name: str) -> bool:
        return (name,) in self.parts


def _piece(text: str, binder_names: set[str], notation: bool) -> _Piece:
    """`text` with the statement's binder names marked and the names it binds itself renamed by first binding (`y1`,
    `y2`, ...); with `notation`, tokens one space apart, `(x)` as `x` and comparisons mirrored into `≤` and `<`."""
    inner = [name for name in _bound_names([], text) if name not in binder_names]
    fresh = {name: f"y{i}" for i, name in enumerate(inner, 1)}
    if notation:
        words = _mirrored_comparisons(_unparenthesized(_notation_tokens(text)))
        spans = [(word, " ") for word in words]
    else:
        tokens = code_tokens(text)
        ends = [token.start + len(token.text) for token in tokens]
        gaps = [text[end:following.start] for end, following in zip(ends, tokens[1:])] + [""]
        spans = [(token.text, gap) for token, gap in zip(tokens, gaps)]
    parts: list[str | tuple[str]] = []
    for word, gap in spans:
        head, dot, tail = word.partition(".")
        if head in binder_names:
            parts += [(head,), dot + tail + gap]
        else:
            parts.append((fresh.get(head, head) + dot + tail if head in fresh else word) + gap)
    return _Piece(tuple(parts))


def _whole(term: str) -> str:
    """A hypothesis or conclusion without parentheses around the whole of it: there they group nothing (a `·`
    function inside them is kept as written)."""
    while term.startswith("(") and _matching(term) == len(term) - 1 and "·" not in _outside_brackets(term[1:-1]):
        term = term[1:-1].strip()
    return term


def _conjuncts(term: str) -> list[str]:
    """`A ∧ B ∧ C` as its conjuncts, when `∧` is the outermost connective (no `∨`, arrow, comma or binder around
    it): a hypothesis `(h : A ∧ B)` nothing mentions says what `(h₁ : A) (h₂ : B)` say."""
    top = _outside_brackets(term)
    if _LOOSER.search(top) or re.search(r"∨|→", top):
        return [term]
    cuts = [m.start() for m in re.finditer(" ∧ ", top)]
    if not cuts:
        return [term]
    bounds = [0, *[cut + 3 for cut in cuts]]
    ends = [*cuts, len(term)]
    return [_whole(term[start:end].strip()) for start, end in zip(bounds, ends)]


def statement_key(signature: str, notation: bool = False, opened: frozenset[str] = frozenset()) -> str:
    """One text for every way of writing a statement that `canonical_statement` erases and, besides, the names and
    order of its binders and hypotheses: binders are sorted, each bound name is named by where it stands in the
    statement (its type, the hypotheses and conclusion that mention it), not by where it was written, and a
    hypothesis nothing mentions is `_`. With `notation`, also what `_notation_free` erases, implicit or explicit
    brackets, parentheses around one token and `≥`/`>` written as `≤`/`<` with sides swapped. Two statements with one
    key say the same thing up to those, and, with `notation`, up to a hypothesis nothing mentions written as one
    conjunction or as its conjuncts; without Lean, nothing more is claimed."""
    text = normalize_space(signature)
    if notation:
        text = _notation_free(text, opened)
    groups, rest = _statement_binders(text)
    binders = [_read_binder(group) for group in groups]
    if notation:
        binders = [_Binder("(" if b.opener in "{⦃" else b.opener, b.name, b.type) for b in binders]
    names = {b.name for b in binders if b.name}
    pieces = [_piece(_whole(b.type), names, notation) for b in binders]
    conclusion = _piece(_whole(rest[1:].strip() if rest.startswith(":") else rest), names, notation)
    used = [name for name in dict.fromkeys(b.name for b in binders if b.name)
            if any(piece.mentions(name) for piece in [*pieces, conclusion])]
    if notation:
        split = [(_Binder(b.opener, b.name, part), _piece(part, names, notation))
                 for b, piece in zip(binders, pieces)
                 for part in (_conjuncts(_whole(b.type)) if b.name and b.name not in used and b.type else [b.type])]
        binders, pieces = [b for b, _ in split], [piece for _, piece in split]
    own = {b.name: (b.opener, piece) for b, piece in zip(binders, pieces) if b.name}

    def render(naming: dict[str, str]) -> str:
        naming = {**{name: "_" for name in names}, **naming}
        shown = sorted(
            f"[{piece.render(naming)}]" if b.opener == "[" else
            f"{b.opener}{naming[b.name]}{' : ' + piece.render(naming) if b.type else ''}{_CLOSING[b.opener]}"
            for b, piece in zip(binders, pieces)
        )
        return " ".join([*shown, ":", conclusion.render(naming)])

    colors = _binder_colors(used, own, pieces, conclusion)
    return min(render(naming) for naming in _namings(used, colors, conclusion))


def _binder_colors(used: list[str], own: dict[str, tuple[str, _Piece]], pieces: list[_Piece], conclusion: _Piece
                   ) -> dict[str, int]:
    """Each used binder name's standing, refined until stable (colour refinement): its bracket and type, then the
    hypotheses and conclusion that mention it with the others shown by their standing."""
    colors = dict.fromkeys(used, 0)
    while True:
        def standing(name: str) -> tuple:
            shown = {other: f"#{colors[other]}" for other in used}
            shown[name] = "@"
            opener, kind = own[name]
            uses = sorted(("h" if piece is not conclusion else "c", piece.render(shown))
                          for piece in [*pieces, conclusion] if piece.mentions(name))
            return colors[name], opener, kind.render(shown), tuple(uses)

        standings = {name: standing(name) for name in used}
        ranks = {value: rank for rank, value in enumerate(sorted(set(standings.values())))}
        refined = {name: ranks[standings[name]] for name in used}
        if len(set(refined.values())) == len(set(colors.values())):
            return refined
        colors = refined


def _namings(used: list[str], colors: dict[str, int], conclusion: _Piece) -> list[dict[str, str]]:
    """The namings `x1`, `x2`, ... of the used binders by standing; binders of equal standing in every order (up to
    `_MAX_ORDERINGS`), else in the order the conclusion, then the binders, first mention them."""
    mention = {name: next((i for i, part in enumerate(conclusion.parts) if part == (name,)), len(conclusion.parts))
               for name in used}
    classes = [sorted((n for n in used if colors[n] == color), key=lambda n: (mention[n], used.index(n)))
               for color in sorted(set(colors.values()))]
    if math.prod(math.factorial(len(c)) for c in classes) > _MAX_ORDERINGS:
        orders = [[name for c in classes for name in c]]
    else:
        orders = [[name for c in combo for name in c]
                  for combo in itertools.product(*(itertools.permutations(c) for c in classes))]
    return [{name: f"x{i}" for i, name in enumerate(order, 1)} for order in orders]


def signature_type(signature: str) -> str:
    """The type a signature declares: what follows its first top-level colon (`_` when it has none)."""
    depth = 0
    for i, c in enumerate(signature):
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth = max(0, depth - 1)
        elif c == ":" and depth == 0 and not signature.startswith(":=", i):
            return signature[i + 1 :].strip() or "_"
    return "_"


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
    for spelling, token in _SAME_TOKEN:
        spelled = spelled.replace(spelling, token)
    bound = set(_bound_names(groups, spelled))
    code = lex(signature).blanked(COMMENTS_AND_LITERALS)
    names = (plain_name(m.group()) for m in re.finditer(_TOKEN_BEFORE + _NAME.pattern, code))
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
            if word not in _OPEN_WORDS and _NAME.fullmatch(word) and word not in opened:
                opened.append(word)
    return opened


# ---------------------------------------------------------------------------------------------------------
# Tokens: what Lean reads as one word, for rules that must not fire on part of a longer name.
# ---------------------------------------------------------------------------------------------------------

# `#` commands a token can start with (Lean reads `#evalIO.println` as `#eval IO.println`): the longest wins.
_HASH_TOKENS = sorted(
    {*_HASH_COMMANDS, "#check_tactic", "#check_simp", "#guard_expr", "#kernel_check", "#instances", "#widget",
     "#html", "#test", "#sample", "#long_names", "#parse", "#discr_tree_key", "#discr_tree_simp_key", "#push_neg",
     "#unfold?", "#whnf", "#whnfR", "#print", "#version", "#import_path", "#decompose", "#mex", "#leansearch",
     "#loogle", "#moogle", "#statesearch", "#defeq_abuse", "#show_deps"},
    key=len, reverse=True,
)
_TOKEN_NAME = re.compile(rf"{_NAME_PART}(?:\.{_NAME_PART})*")
_NUMBER = re.compile(r"\d[\d_]*(?:\.\d+)?|0[xXbBoO][0-9a-fA-F_]+")
_BRACKETS = frozenset(_OPENERS + _CLOSERS)


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
        if c not in _BRACKETS and not c.isalnum():
            while j < n and not code[j].isspace() and code[j] not in _BRACKETS and code[j] != "#" \
                    and not (code[j].isalnum() or code[j] in "_«"):
                j += 1
        tokens.append(Token(code[i:j], "symbol", i, line))
        i = j
    return tokens


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


# ---------------------------------------------------------------------------------------------------------
# Goals: the proof states the REPL prints (`x y : ℕ\nh : x < y\n⊢ x ≤ y`), read back as statements.
# ---------------------------------------------------------------------------------------------------------

TURNSTILE = "⊢"
# Lean's mark on a name a tactic made that the user cannot write (`a✝`, `inst✝¹`).
INACCESSIBLE = "✝"
_SUPERSCRIPT_DIGITS = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_INACCESSIBLE_NAME = re.compile(rf"({_IDENT})✝[{_SUPERSCRIPT_DIGITS}]*")
_HYPOTHESIS = re.compile(rf"(?P<names>(?:\S+\s+)*\S+)\s:\s(?P<type>.*)", re.S)
_CASE_TAG = re.compile(r"case\s")
_HAVE_HEAD = re.compile(rf"(?:have|haveI)\s+(?:(?P<name>{_IDENT})\s*)?:\s*")
_INSTANCE_PREFIX = "inst"


@dataclass(frozen=True)
class Goal:
    """One goal of a proof state: its hypotheses (names and type, in the order Lean prints them) and its target.
    `let_bound` is set when a hypothesis carries a value (`x : ℕ := 3`), which a binder cannot say."""

    hypotheses: tuple[tuple[tuple[str, ...], str], ...]
    target: str
    let_bound: bool = False

    @property
    def is_assumption(self) -> bool:
        """The target is one of the hypotheses, up to layout: `assumption` closes it, it states nothing new."""
        target = layout_free(self.target)
        return any(layout_free(kind) == target for _, kind in self.hypotheses)


def read_goal(text: str) -> Goal | None:
    """A goal as the REPL prints it (a `sorries` entry's `goal`, or the goal of an `unsolved goals` error): lines of
    `names : type` (an indented line goes on the one before), a `case` tag, then `⊢ target`. None when it has no
    target."""
    lines: list[str] = []
    for line in text.splitlines():
        if line[:1].isspace() and lines:
            lines[-1] += " " + line.strip()
        elif line.strip():
            lines.append(line.strip())
    if lines and _CASE_TAG.match(lines[0]):
        lines = lines[1:]
    at = next((i for i, line in enumerate(lines) if line.startswith(TURNSTILE)), None)
    if at is None:
        return None
    hypotheses, let_bound = [], False
    for line in lines[:at]:
        m = _HYPOTHESIS.fullmatch(line)
        if m is None:
            return None
        kind = m.group("type")
        let_bound = let_bound or ":=" in _outside_brackets(kind)
        hypotheses.append((tuple(m.group("names").split()), kind.strip()))
    target = " ".join([lines[at][len(TURNSTILE):].strip(), *lines[at + 1:]]).strip()
    return Goal(tuple(hypotheses), target, let_bound) if target else None


def unsolved_goals(message: str) -> list[str]:
    """The goals of an `unsolved goals` error message, one text each (Lean separates them by a blank line)."""
    head, _, rest = message.partition("\n")
    if head.strip() != "unsolved goals":
        return []
    return [block.strip("\n") for block in re.split(r"\n\s*\n", rest) if TURNSTILE in block]


def goal_theorem(goal: Goal, name: str) -> str:
    """The goal as a theorem named `name` with `sorry` for its proof: each hypothesis a binder (an instance one in
    brackets), names Lean made inaccessible given fresh ones, and the universe levels it mentions declared."""
    taken = identifiers(" ".join([goal.target, *(kind for _, kind in goal.hypotheses),
                                  *(n for names, _ in goal.hypotheses for n in names)]))
    fresh: dict[str, str] = {}

    def accessible(match: re.Match[str]) -> str:
        written = match.group(0)
        if written not in fresh:
            base, number = match.group(1), 1
            while f"{base}_{number}" in taken:
                number += 1
            fresh[written] = f"{base}_{number}"
            taken.add(fresh[written])
        return fresh[written]

    binders = []
    for names, kind in goal.hypotheses:
        kind = _INACCESSIBLE_NAME.sub(accessible, kind)
        if all(n.startswith(_INSTANCE_PREFIX) and INACCESSIBLE in n for n in names):
            binders.extend(f"[{kind}]" for _ in names)
        else:
            binders.append(f"({' '.join(_INACCESSIBLE_NAME.sub(accessible, n) for n in names)} : {kind})")
    target = _INACCESSIBLE_NAME.sub(accessible, goal.target)
    levels = sorted({m.group(1) for m in re.finditer(rf"\b(?:Type|Sort)\s+({_IDENT})", " ".join(binders + [target]))
                     if not m.group(1).startswith("_")})
    universe = f"universe {' '.join(levels)}\n\n" if levels else ""
    signature = " ".join([name, *binders])
    return f"{universe}theorem {signature} : {target} := by sorry"


def signature_hypotheses(signature: str) -> list[str]:
    """A declaration's leading binders as the hypothesis lines of its goal (`(x y : ℕ)` -> `x y : ℕ`, an anonymous
    instance `[Field K]` -> `inst✝ : Field K`), as the REPL prints them at the start of its proof."""
    groups, _ = leading_binders(signature)
    lines = []
    for group in groups:
        m = _BINDER_GROUP.match(group)
        if m is not None:
            lines.append(f"{m.group('names')} : {normalize_space(group[m.end():-1])}")
        elif group.startswith("["):
            lines.append(f"{_INSTANCE_PREFIX}{INACCESSIBLE} : {normalize_space(group[1:-1])}")
    return lines


def sorry_goal(signature: str, before: str) -> str:
    """The goal a `sorry` stands for, as the REPL prints it, given the declaration's signature and its source from
    its name up to the `sorry`: the `have` it closes (`have h : T := by sorry`) with the hypotheses in scope (the
    binders and the `have`s finished before it), else the declaration's own type. Nested tactic blocks are read
    flat."""
    hypotheses = signature_hypotheses(signature)
    target = " ".join(signature_type(signature).split())
    proof_at = _outside_brackets(_scan_text(lex(before))).find(":=")
    proof_before = before[proof_at + 2:] if proof_at >= 0 else ""
    scan = _scan_text(lex(proof_before))
    haves = [m for start, _ in find_tokens(scan, ("have", "haveI")) if (m := _HAVE_HEAD.match(scan, start))]
    for index, m in enumerate(haves):
        typed = scan[m.end():]
        assign = _outside_brackets(typed).find(":=")
        if assign < 0:
            continue
        kind = " ".join(proof_before[m.end():m.end() + assign].split())
        after = scan[m.end() + assign + 2:].strip()
        if index == len(haves) - 1 and after in ("by", ""):
            return "\n".join([*hypotheses, f"{TURNSTILE} {kind}"])
        hypotheses.append(f"{m.group('name') or 'this'} : {kind}")
    return "\n".join([*hypotheses, f"{TURNSTILE} {target}"])
