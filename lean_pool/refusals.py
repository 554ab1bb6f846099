"""What LLM-written code is refused for before anything reaches Lean, each reason naming its line.

Code that runs programs or changes the checker must never run: once it has, not even the kernel's answer can be
trusted. So the commands a file may hold are an allowlist, metaprogramming entry points a denylist of Lean tokens,
and text our lexer cannot read the way Lean does is refused too. These rules read the text alone (pure functions);
`lean_pool.verdict.precheck` applies them.
"""

from __future__ import annotations

from lean_pool.lean_source import Token, code_tokens, lex, read_commands, unread_command_lines

# The top-level commands an LLM-written file may contain: declarations, scoping and context, notation (whose
# effect on the statement `verdict.context_reasons` checks against the reference), and the two commands that only
# print. Anything else that `read_commands` finds, or that starts a line where Lean would read a command, is
# refused by name.
ALLOWED_COMMANDS = frozenset({
    "theorem", "lemma", "example", "def", "abbrev", "instance", "structure", "class", "inductive",
    "class inductive", "class abbrev", "namespace", "section", "end", "mutual", "universe", "variable", "include",
    "omit", "open", "set_option", "attribute", "import", "notation", "infix", "infixl", "infixr", "prefix", "postfix",
    "#check", "#print",
})

# The options `set_option` may change, each a full name or a prefix ending in "." (`linter.` covers every
# linter). They only bound resources, silence linters, change printing or tune tactics whose output the kernel
# checks; options that switch checks off (`debug.*`, `warn.sorry`, `allowUnsafeReducibility`, ...) are not here.
ALLOWED_OPTIONS: tuple[str, ...] = (
    "maxHeartbeats", "maxRecDepth", "synthInstance.maxHeartbeats", "synthInstance.maxSize", "maxSynthPendingDepth",
    "exponentiation.threshold", "autoImplicit", "relaxedAutoImplicit", "push_neg.use_distrib", "simprocs",
    "linter.", "pp.",
)
# Why some options are off the list, for a clearer reason than "not allowed".
_OPTION_REASONS: tuple[tuple[str, str], ...] = (
    ("debug.", "debug options can switch off checks (e.g. `debug.skipKernelTC` skips the kernel)"),
    ("warn.sorry", "`warn.sorry` hides the warning that a declaration uses `sorry`"),
    ("allowUnsafeReducibility", "`allowUnsafeReducibility` lets a file change how library definitions unfold"),
    ("compiler.", "compiler options change the code that `native_decide`-style evaluation trusts"),
)

# Keywords refused wherever they stand as a token of their own (in a command, a term or a tactic block); a
# longer name that contains one (`my_elab_lemma`, `Foo.axiom`) is another token and is not refused.
_REFUSED_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("by_elab", "runs a metaprogram in place of a proof term"),
    ("run_tac", "runs a metaprogram that can close goals without a proof term check"),
    ("run_cmd", "runs a metaprogram that can change the environment"),
    ("run_elab", "runs a metaprogram while the file is checked"),
    ("run_meta", "runs a metaprogram while the file is checked"),
    ("elab", "defines elaboration code that runs while the file is checked"),
    ("elab_rules", "defines elaboration code that runs while the file is checked"),
    ("macro", "can rewrite any later text, including the statement"),
    ("macro_rules", "can rewrite any later text, including the statement"),
    ("syntax", "changes how later text, including the statement, is parsed"),
    ("declare_syntax_cat", "changes how later text is parsed"),
    ("notation3", "defines notation through Mathlib's elaborator; plain `notation` is enough for a proof"),
    ("simproc", "registers code that `simp` runs while the file is checked"),
    ("dsimproc", "registers code that `simp` runs while the file is checked"),
    ("simproc_decl", "declares code that `simp` can run while the file is checked"),
    ("dsimproc_decl", "declares code that `simp` can run while the file is checked"),
    ("initialize", "runs IO actions when the environment is loaded"),
    ("builtin_initialize", "runs IO actions when the environment is loaded"),
    ("unsafe", "code escapes the type system in compiled code"),
    ("partial", "definitions are compiled without a termination proof and hide their body from the kernel"),
    ("axiom", "assumes a statement without proof"),
    ("opaque", "declares a constant whose value the kernel never sees; a proof has no need for one"),
    ("native_decide", "trusts the compiler instead of the kernel (Lean.ofReduceBool)"),
    ("implemented_by", "replaces a definition's code with other code"),
    ("extern", "replaces a definition's code with foreign code"),
)

# Term elaborators spelled `name%`. Only these are refused: a glued `n%2` is ordinary arithmetic.
_REFUSED_ELABORATORS: tuple[tuple[str, str], ...] = (
    ("eval%", "evaluates compiled code while the term is elaborated"),
    ("compile_inductive%", "asks the compiler for code of a type"),
    ("compile_def%", "asks the compiler for code of a definition"),
)

# `#` commands a proof may write; every other one is refused (they run programs, test, time or search).
_ALLOWED_HASH = frozenset({"#check", "#print"})
_HASH_REASONS: dict[str, str] = {
    "#eval": "runs programs while the file is checked",
    "#exit": "stops checking, so what follows is never checked",
    "#guard_msgs": "can swallow messages, including the sorry warning",
    "#guard": "evaluates programs while the file is checked",
    "#reduce": "asks Lean to reduce a term, which a proof does not need and which can run for ever",
}

# Namespaces of Lean's metaprogramming, environment and compiler APIs: a name in one of them (however
# written: `_root_.`, `«»`) means the file is a metaprogram or handles the environment the checker trusts.
_REFUSED_NAMESPACES: tuple[tuple[str, str], ...] = (
    ("Lean.Elab", "is Lean's elaborator API: a file that names it is a metaprogram"),
    ("Lean.Meta", "is Lean's metaprogramming API: a file that names it is a metaprogram"),
    ("Lean.Parser", "is Lean's parser API: a file that names it can change how text is read"),
    ("Lean.PrettyPrinter", "is Lean's printing API: a file that names it can change what messages show"),
    ("Lean.Core", "is Lean's core monad: a file that names it is a metaprogram"),
    ("Lean.Macro", "is Lean's macro API: a file that names it is a metaprogram"),
    ("Lean.Syntax", "is Lean's syntax tree: a file that names it is a metaprogram"),
    ("Lean.Expr", "is Lean's term representation: a file that names it builds terms by hand"),
    ("Lean.Declaration", "is what the kernel is given: a file that names it adds declarations by hand"),
    ("Lean.ConstantInfo", "is what the environment stores: a file that names it forges constants"),
    ("Lean.Environment", "is the environment the checker trusts: a file that names it can forge it"),
    ("Lean.Kernel", "is the kernel's API: a file that names it can bypass or reconfigure it"),
    ("Lean.Compiler", "is the compiler's API: a file that names it can change trusted compiled code"),
    ("Lean.IR", "is the compiler's code representation: a file that names it can change trusted code"),
    ("Lean.Server", "is the language server's API: a proof has no use for it"),
)
# Constants refused under any namespace and as any part of a name (`Lean.trustCompiler.elim`), with why.
_REFUSED_CONSTANTS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"ofReduceBool", "ofReduceNat", "reduceBool", "reduceNat", "trustCompiler"}),
     "makes the kernel trust compiled code (`Lean.ofReduceBool` and friends)"),
    (frozenset({"unsafeCast", "unsafeBaseIO", "unsafeIO", "unsafeEIO", "lcProof", "lcUnreachable"}),
     "escapes the type system"),
    (frozenset({"modifyEnv", "setEnv", "addDecl", "addDeclCore", "addAndCompile", "addDeclWithoutChecking"}),
     "changes the environment by hand, past the checks of ordinary declarations"),
    (frozenset({"evalExpr", "evalConst", "evalDecl"}), "runs compiled code while the file is checked"),
)
# `open`/`namespace` of these puts the APIs above in reach under short names (`open Lean` makes `Elab.x` mean
# `Lean.Elab.x`), so they are refused too.
_META_ROOTS = ("Lean",)

# Attributes whose effect is to run user code while checking, or to swap the code that runs.
_REFUSED_ATTRIBUTES: dict[str, str] = {
    "extern": "`@[extern]` replaces a definition's code with foreign code",
    "implemented_by": "`@[implemented_by]` replaces a definition's code with other code",
    "export": "`@[export]` exposes a definition to foreign code under a symbol name",
    "csimp": "`@[csimp]` replaces a definition's code with other code",
    "init": "`@[init]` runs IO actions when the environment is loaded",
    "tactic": "`@[tactic]` installs user code as a tactic that runs while the file is checked",
    "command_elab": "`@[command_elab]` installs user code that runs while the file is checked",
    "term_elab": "`@[term_elab]` installs user code that runs while the file is checked",
    "macro": "`@[macro]` installs user code that rewrites later text",
    "delab": "`@[delab]` installs user code that runs while messages are printed",
    "app_unexpander": "`@[app_unexpander]` installs user code that runs while messages are printed",
    "simproc": "`@[simproc]` registers code that `simp` runs while the file is checked",
    "norm_num": "`@[norm_num]` registers code that `norm_num` runs while the file is checked",
    "positivity": "`@[positivity]` registers code that `positivity` runs while the file is checked",
    "env_linter": "`@[env_linter]` installs user code that runs over the environment",
}
# Keywords that are also arguments of honest attributes: Aesop ranks its rules `safe`, `norm` or `unsafe`.
_ATTRIBUTE_ARGUMENTS = frozenset({"unsafe"})
_BUILTIN_ATTRIBUTE_REASON = "`@[builtin_...]` attributes install code into Lean itself"

_SORRY_KEYWORDS = (("sorry", "`sorry` leaves a goal unproved"), ("admit", "`admit` leaves a goal unproved"))
_SORRY_AXIOM = "`sorryAx` is the axiom behind `sorry`"


def _in_namespace(name: str, namespace: str) -> bool:
    return name == namespace or name.startswith(namespace + ".")


def _name_reason(token: Token) -> str | None:
    """Why a name token is refused: a keyword of `_REFUSED_KEYWORDS` written as such (not `«escaped»`), a
    name in a refused namespace, or a refused constant under any namespace."""
    keyword = dict(_REFUSED_KEYWORDS).get(token.text)
    if keyword:
        return f"`{token.text}` {keyword}"
    name = token.plain
    for namespace, reason in _REFUSED_NAMESPACES:
        if _in_namespace(name, namespace):
            return f"`{name}`: `{namespace}` {reason}"
    parts = set(name.split("."))
    for constants, reason in _REFUSED_CONSTANTS:
        if parts & constants:
            return f"`{name}` {reason}"
    return None


def _names_after(tokens: list[Token], index: int) -> list[Token]:
    """The name tokens right after `tokens[index]` on its line (what an `open` or `namespace` names)."""
    names = []
    for token in tokens[index + 1 :]:
        if token.kind != "name" or token.line != tokens[index].line or token.text in ("in", "hiding", "renaming"):
            break
        names.append(token)
    return names


def _option_reason(option: str) -> str | None:
    if any(option == allowed or (allowed.endswith(".") and option.startswith(allowed)) for allowed in ALLOWED_OPTIONS):
        return None
    specific = next((reason for prefix, reason in _OPTION_REASONS if option.startswith(prefix)), None)
    return specific or "only options that bound resources, linters or printing may be set (see ALLOWED_OPTIONS)"


def _inside_attributes(tokens: list[Token]) -> set[int]:
    """Indices of the tokens inside `@[...]` and `attribute [...]` brackets, where words are attribute
    arguments (`@[aesop unsafe apply]` is an Aesop rule of low priority, not `unsafe` code)."""
    inside: set[int] = set()
    depth = 0
    for index, token in enumerate(tokens):
        opens = token.text == "[" and index > 0 and (
            (tokens[index - 1].text == "@" and tokens[index - 1].start + 1 == token.start)
            or tokens[index - 1].text in ("attribute", "local", "scoped"))
        if depth:
            inside.add(index)
            depth += token.text.count("[") - token.text.count("]")
        elif opens:
            depth = 1
    return inside


def _token_reasons(tokens: list[Token]) -> list[tuple[int, str]]:
    """Refusals read off the tokens, wherever they stand: keywords, `#` commands, `name%` elaborators, refused
    names, `+native`/`native := true`, `open private`, opening or entering Lean's own namespaces, options."""
    found: list[tuple[int, str]] = []
    in_attributes = _inside_attributes(tokens)
    for index, token in enumerate(tokens):
        if index in in_attributes and token.text in _ATTRIBUTE_ARGUMENTS:
            continue
        before = tokens[index - 1] if index else None
        after = tokens[index + 1 : index + 3]
        if token.kind == "hash" and token.text not in _ALLOWED_HASH:
            reason = _HASH_REASONS.get(token.text, "tests, searches or runs code; a proof has no use for it")
            found.append((token.line, f"`{token.text}` {reason}"))
        elif token.kind == "percent":
            why = dict(_REFUSED_ELABORATORS).get(token.text)
            if why:
                found.append((token.line, f"`{token.text}` {why}"))
        elif token.kind != "name":
            continue
        elif token.text == "native" and before and before.text.endswith("+") and before.start + 1 == token.start:
            found.append((token.line, "`decide +native` trusts the compiler instead of the kernel"))
        elif (token.text == "native" and before and before.text[-1:] in "{(,"
              and [t.text for t in after] == [":=", "true"]):
            found.append((token.line, "`native := true` trusts the compiler instead of the kernel"))
        elif token.text == "open":
            names = _names_after(tokens, index)
            if names and names[0].text == "private":
                found.append((token.line, "`open private` reaches declarations their module keeps private "
                                          "(such as `Lean.Environment.mk`, which builds an environment by hand)"))
            for name in names:
                if any(_in_namespace(name.plain, root) for root in _META_ROOTS):
                    found.append((token.line, f"`open {name.plain}` puts Lean's metaprogramming API in reach "
                                              "under short names"))
        elif token.text == "namespace":
            names = _names_after(tokens, index)[:1]
            if names and any(_in_namespace(names[0].plain, root) for root in _META_ROOTS):
                found.append((token.line, f"`namespace {names[0].plain}` works inside Lean's own namespace, "
                                          "where its metaprogramming API is in reach under short names"))
        elif token.text == "set_option" and after and after[0].kind == "name":
            option = after[0].plain
            why = _option_reason(option)
            if why:
                found.append((token.line, f"`set_option {option}`: {why}"))
        else:
            why = _name_reason(token)
            if why:
                found.append((token.line, why))
    return found


def _command_reasons(code: str) -> list[tuple[int, str]]:
    """Refusals read off the commands: any command off `ALLOWED_COMMANDS` (those refused as tokens already
    are not repeated), declarations put in Lean's own namespace, refused attributes, and lines where Lean would
    start a command that this reader does not know."""
    token_refused = {word for word, _ in _REFUSED_KEYWORDS} | set(_HASH_REASONS)
    found: list[tuple[int, str]] = []
    for command in read_commands(code):
        if command.kind not in ALLOWED_COMMANDS and command.kind not in token_refused:
            if not command.kind.startswith("#"):
                found.append((command.line, f"`{command.kind}` is not among the commands a proof may use "
                                            "(declarations, scoping, `open`, `variable`, allowed options, notation)"))
        if command.name and any(_in_namespace(command.name, root) for root in _META_ROOTS):
            found.append((command.line, f"`{command.name}` is declared in Lean's own namespace"))
        for name in command.attributes:
            reason = _REFUSED_ATTRIBUTES.get(name)
            if reason is None and name.startswith("builtin_"):
                reason = _BUILTIN_ATTRIBUTE_REASON
            if reason:
                found.append((command.line, reason))
    for line, word in unread_command_lines(code):
        found.append((line, f"`{word}` starts a command that is not among the commands a proof may use"))
    return found


def refusal_reasons(code: str) -> list[str]:
    """Why `code` must not reach Lean at all (empty: nothing refused), each reason naming its line.

    The commands a file may contain are an allowlist (`ALLOWED_COMMANDS`, `ALLOWED_OPTIONS` for `set_option`);
    inside terms and tactic blocks, a denylist of metaprogramming entry points is matched as Lean tokens, so
    `by_elab` or `Lean.Elab.Term.x` is refused and `my_elab_lemma` or `Foo.elaborate` is not. Text our lexer
    cannot read the way Lean does is refused too. Comments, string and character literals never trigger a
    refusal. `sorry` is not refused here: statements legitimately contain it (see `textual_sorry_reasons`).
    """
    lexed = lex(code)
    reasons = [f"unreadable text: {problem}; Lean might read it as code" for problem in lexed.problems]
    found = _token_reasons(code_tokens(code)) + _command_reasons(code)
    reasons += [f"line {line}: {reason}" for line, reason in sorted(found, key=lambda item: item[0])]
    return list(dict.fromkeys(reasons))


def textual_sorry_reasons(code: str) -> list[str]:
    """Where a proof says `sorry`, `admit` or `sorryAx` outside comments and strings.

    Kept apart from `refusal_reasons` because statements (the formalize stage) are written with
    `sorry` on purpose; proofs are checked with both. Lean would report these too; catching them in
    the text saves a Lean run and does not depend on how a Lean version words its warning.
    """
    tokens = [token for token in code_tokens(code) if token.kind == "name"]
    reasons = []
    for word, reason in _SORRY_KEYWORDS:
        first = next((token for token in tokens if token.text == word), None)
        if first:
            reasons.append(f"line {first.line}: {reason}")
    axiom = next((token for token in tokens if token.plain.rsplit(".", 1)[-1] == "sorryAx"), None)
    if axiom:
        reasons.append(f"line {axiom.line}: {_SORRY_AXIOM}")
    return reasons
