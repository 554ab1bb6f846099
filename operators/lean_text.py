"""Pure text surgery for the mining pipeline: LLM answer -> Lean code -> one file per lemma, and judge verdicts.

The discover operator turns one brainstorming answer into candidate statements with `extract_code` and
`split_lemmas`; the judge operator reads its answer with `judge_accepts`. They are plain functions (no I/O,
no Ray) so that they can be tested on real MathlibLemma data and reused by every stage that reads LLM output.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field

# --- extract_code -----------------------------------------------------------------------------------------

_FENCE_OPEN = re.compile(r"[ \t]*(`{3,})[ \t]*([^\s`]*)[^`]*")
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,})[ \t]*")
_ANY_FENCE = re.compile(r"^[ \t]*`{3,}", re.MULTILINE)
# Info strings that mark a Lean block; an untagged fence counts too, since models often omit the language.
_LEAN_FENCE_TAGS = frozenset({"", "lean", "lean4"})


def extract_code(response: str, marker: str) -> str | None:
    """The Lean code an LLM wrote after the last occurrence of `marker`, or None when the marker is absent.

    Models plan and sketch before the marker, so only text after its last occurrence (case-insensitive)
    counts. There the last non-empty fenced block tagged `lean`, `lean4` or untagged wins (the final
    version, skipping an empty block such as a stray closing fence); a block left open by an answer cut
    at max tokens runs to the end of the answer. Without such a block, the code is the text from the
    marker's line to the next fence line (the marker may sit inside the block) or to the end. The result
    is dedented (fences inside list items) and stripped.
    """
    if not marker:
        raise ValueError("extract_code needs a non-empty marker")
    occurrences = list(re.finditer(re.escape(marker), response, flags=re.IGNORECASE))
    if not occurrences:
        return None
    line_end = response.find("\n", occurrences[-1].end())
    after = "" if line_end < 0 else response[line_end + 1 :]
    blocks = [body for tag, body in _fenced_blocks(after) if tag.lower() in _LEAN_FENCE_TAGS and body.strip()]
    code = blocks[-1] if blocks else _ANY_FENCE.split(after, maxsplit=1)[0]
    return textwrap.dedent(code).strip()


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info string, body) of each backtick-fenced block, CommonMark style; an unclosed block runs to the end."""
    blocks: list[tuple[str, str]] = []
    opening: re.Match[str] | None = None
    body: list[str] = []
    for line in text.split("\n"):
        if opening is None:
            opening = _FENCE_OPEN.fullmatch(line)
            body = []
        elif (closing := _FENCE_CLOSE.fullmatch(line)) and len(closing.group(1)) >= len(opening.group(1)):
            blocks.append((opening.group(2), "\n".join(body)))
            opening = None
        else:
            body.append(line)
    if opening is not None:
        blocks.append((opening.group(2), "\n".join(body)))
    return blocks


# --- judge_accepts ----------------------------------------------------------------------------------------

# Markdown a model may put before its verdict word (`**Correct**`, `### correct`, `> correct`).
_LEADING_MARKUP = " \t*_#>`"


def judge_accepts(response: str) -> bool:
    """The paper's acceptance rule: the last non-empty line starts with `correct`, case-insensitive.

    Leading whitespace and markdown emphasis/heading/quote characters are ignored so that `**Correct.**`
    is accepted; `incorrect` is not, because it does not start with `correct`.
    """
    lines = [line for line in response.split("\n") if line.strip()]
    return bool(lines) and lines[-1].lstrip(_LEADING_MARKUP).lower().startswith("correct")


# --- split_lemmas -----------------------------------------------------------------------------------------

# Words that begin a Lean command when they start a line at column 0; any other line continues the
# command above it (lemma bodies are indented, but a statement's continuation may sit at column 0).
_COMMAND_WORDS = (
    "import open export universe variable include omit namespace section end noncomputable set_option "
    "lemma theorem def abbrev instance structure class inductive example axiom opaque attribute "
    "private protected nonrec partial unsafe scoped local notation infix infixl infixr prefix postfix "
    "macro macro_rules syntax elab elab_rules declare_syntax_cat initialize builtin_initialize mutual "
    "deriving alias irreducible_def add_decl_doc library_note suppress_compilation assert_not_exists run_cmd"
).split()
_COMMAND_START = re.compile(r"/--|@\[|#[A-Za-z_]|(?:" + "|".join(_COMMAND_WORDS) + r")\b")
# What may precede a declaration's keyword and belongs to that declaration alone: docstring (its inside is
# blanked by `_mask`), attributes (one level of nested brackets), modifiers, `open ... in`, `set_option ... in`.
_DECLARATION_PREFIX = re.compile(
    r"\s*(?:/--\s*-/"
    r"|@\[[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*\]"
    r"|(?:private|protected|noncomputable|nonrec|partial|unsafe)\b"
    r"|(?:open|set_option)\b[\s\S]*?\bin\b)"
)
_COMMAND_KIND = re.compile(r"#?\w+")

_DECLARATIONS = frozenset({"lemma", "theorem"})
_SCOPE_OPENERS = frozenset({"namespace", "section"})
# Commands whose effect lasts until the end of the enclosing scope and that a statement may need.
# `include`/`omit` are kept beside `variable` because they decide which section variables a theorem gets.
_CONTEXT_COMMANDS = frozenset({"open", "universe", "variable", "set_option", "include", "omit"})

_COMMENT_OR_STRING = re.compile(r'--|/-|"')
_BLOCK_COMMENT_DELIMITER = re.compile(r"/-|-/")
_STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_DOCSTRING_OPEN = "/--"
_BLOCK_COMMENT_CLOSE = "-/"


@dataclass
class _Scope:
    """A `namespace`/`section` being read, with the context commands issued inside it so far."""

    opener: str | None  # its source text; None for the top level of the file
    closer: str  # the `end` line that closes it
    context: list[str] = field(default_factory=list)


def split_lemmas(lean_text: str) -> list[str]:
    """One self-contained Lean file per `lemma`/`theorem` of `lean_text`, in order.

    Each file has the imports, the enclosing `namespace`/`section` openers (with their `end`s appended)
    and the `open`, `universe`, `variable`, `include`/`omit`, `set_option` commands still in scope at the
    declaration, then the declaration with its docstring, attributes, modifiers and `open ... in`. Nothing
    else is kept: other lemmas, `def`s, instances and comments between commands are dropped, so a
    statement that uses a `def` from the same answer will not compile on its own.
    Scoping follows Lean: `end` closes the innermost scope and everything opened in it.
    """
    imports: list[str] = []
    scopes = [_Scope(opener=None, closer="")]
    files: list[str] = []
    for kind, head, text in _commands(lean_text):
        if kind == "import":
            imports.append(text)
        elif kind in _SCOPE_OPENERS:
            words = head.split()
            scopes.append(_Scope(opener=text, closer=" ".join(["end", *words[1:2]])))
        elif kind == "end" and len(scopes) > 1:
            scopes.pop()
        elif kind in _CONTEXT_COMMANDS:
            scopes[-1].context.append(text)
        elif kind in _DECLARATIONS:
            files.append(_lean_file(imports, scopes, text))
    return files


def _lean_file(imports: list[str], scopes: list[_Scope], declaration: str) -> str:
    """Imports, scope openers with their context, the declaration, then the `end`s, as one file."""
    context = [line for scope in scopes for line in ([scope.opener] if scope.opener else []) + scope.context]
    closers = [scope.closer for scope in reversed(scopes[1:])]
    blocks = ["\n".join(imports), "\n".join(context), declaration, "\n".join(closers)]
    return "\n\n".join(block for block in blocks if block) + "\n"


def _commands(lean_text: str) -> Iterator[tuple[str, str, str]]:
    """(kind, code without prefixes, source text) of each top-level command, prefixes merged into theirs.

    A command runs from a column-0 command word to the next one, minus trailing blank and comment-only
    lines. A command that is only a prefix (a docstring, `@[simp]`, `open X in` on its own lines) is
    joined to the command after it.
    """
    lines = lean_text.split("\n")
    code_lines = _mask(lean_text).split("\n")
    starts = [number for number, code in enumerate(code_lines) if _COMMAND_START.match(code)]
    pending: list[str] = []
    for start, stop in zip(starts, [*starts[1:], len(lines)]):
        while stop > start + 1 and not code_lines[stop - 1].strip():
            stop -= 1
        pending.append("\n".join(lines[start:stop]))
        head = _strip_prefixes("\n".join(code_lines[start:stop]))
        if head:
            kind = _COMMAND_KIND.match(head)
            yield (kind.group() if kind else ""), head, "\n".join(pending)
            pending = []


def _strip_prefixes(code: str) -> str:
    """The command with its leading docstring, attributes, modifiers and `... in` prefixes removed."""
    while prefix := _DECLARATION_PREFIX.match(code):
        code = code[prefix.end() :]
    return code.strip()


def _mask(text: str) -> str:
    """`text` with comments and string literals blanked (newlines kept, so lines stay aligned).

    Docstrings keep their `/--` and `-/` so that they still start a command. Block comments nest, as in Lean.
    """
    pieces: list[str] = []
    position = 0
    while found := _COMMENT_OR_STRING.search(text, position):
        start = found.start()
        if found.group() == "--":
            stop = text.find("\n", start)
            stop = len(text) if stop < 0 else stop
            masked = _blank(text[start:stop])
        elif found.group() == "/-":
            stop = _block_comment_end(text, start)
            comment = text[start:stop]
            inside = comment[len(_DOCSTRING_OPEN) : -len(_BLOCK_COMMENT_CLOSE)]
            is_docstring = _DOCSTRING_OPEN + inside + _BLOCK_COMMENT_CLOSE == comment
            masked = _DOCSTRING_OPEN + _blank(inside) + _BLOCK_COMMENT_CLOSE if is_docstring else _blank(comment)
        else:
            stop = _STRING_LITERAL.match(text, start).end()
            masked = _blank(text[start:stop])
        pieces += [text[position:start], masked]
        position = stop
    pieces.append(text[position:])
    return "".join(pieces)


def _block_comment_end(text: str, start: int) -> int:
    """Index just after the `-/` closing the (nested) block comment opened at `start`, or the text's end."""
    depth = 0
    for delimiter in _BLOCK_COMMENT_DELIMITER.finditer(text, start):
        depth += 1 if delimiter.group() == "/-" else -1
        if depth == 0:
            return delimiter.end()
    return len(text)


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)
