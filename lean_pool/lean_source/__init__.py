"""The one reader of Lean source: commands, their names, signatures and scopes, read the way Lean does.

Everything in Folklore that looks at Lean text (splitting LLM answers, the declaration index and dedup,
the verdict's refusals and statement comparison, the pool's header split, the simulators, the export) reads
it here, so they cannot disagree about where a command starts, what a declaration is called or what its
statement is. Code outside this package imports from this module only; its parts import each other:
- `lexer`: comments, literals, syntax quotations and name literals, inside which nothing is code;
- `tokens`: what Lean reads as one token, and how brackets nest;
- `command_heads`: where each command starts; `commands`: what it declares, its signature, the scopes around it;
- `imports`: the imports at the head of a text, and the commands one text repeats from another;
- `statements`: statements up to layout, binder grouping and bound names (dedup); `statement_keys`: up to the
  order and names of hypotheses too (decontamination); `references`: the constants a statement names;
- `unknown_syntax`: commands this reader does not know, and the symbols a notation adds;
- `goals`: the proof states the REPL prints, read back as statements;
- `placement_reading`: the declarations a lemma's text may refer to, names looked up as Lean resolves them;
- `name_words`: a theorem's hypotheses, conclusion and the atoms they are written with, as its name describes them.
"""

from lean_pool.lean_source.commands import (
    DECLARATION_KINDS,
    THEOREM_KINDS,
    Command,
    Scope,
    body_start,
    namespace_of,
    read_commands,
    scopes_at_end,
)
from lean_pool.lean_source.goals import goal_theorem, read_goal, sorry_goal, unsolved_goals
from lean_pool.lean_source.imports import leading_imports, without_imports, without_repeated
from lean_pool.lean_source.lexer import code_only, lex, strip_comments
from lean_pool.lean_source.name_words import (
    Atom,
    argument_end,
    bound_variables,
    enclosing_start,
    first_theorem,
    operand_start,
    statement_parts,
    term_atoms,
)
from lean_pool.lean_source.placement_reading import (
    constants_meant,
    head_namespaces,
    holds_by_definition,
    mentioned_names,
    namespace_prefixes,
    needed_opens,
    resolve_name,
    statement_features,
    statement_shape,
)
from lean_pool.lean_source.references import opened_namespaces, referenced_constants
from lean_pool.lean_source.statement_keys import statement_key
from lean_pool.lean_source.statements import canonical_statement, leading_binders, signature_type
from lean_pool.lean_source.tokens import (
    OPENERS,
    Token,
    code_tokens,
    find_tokens,
    identifiers,
    is_name,
    layout_free,
    normalize_space,
)
from lean_pool.lean_source.unknown_syntax import NOTATION_KINDS, notation_atoms, unread_command_lines

__all__ = [
    "DECLARATION_KINDS",
    "NOTATION_KINDS",
    "OPENERS",
    "THEOREM_KINDS",
    "Atom",
    "Command",
    "Scope",
    "Token",
    "argument_end",
    "enclosing_start",
    "body_start",
    "canonical_statement",
    "code_only",
    "code_tokens",
    "constants_meant",
    "find_tokens",
    "bound_variables",
    "first_theorem",
    "goal_theorem",
    "head_namespaces",
    "holds_by_definition",
    "mentioned_names",
    "identifiers",
    "is_name",
    "layout_free",
    "leading_binders",
    "leading_imports",
    "lex",
    "namespace_of",
    "namespace_prefixes",
    "needed_opens",
    "normalize_space",
    "notation_atoms",
    "opened_namespaces",
    "read_commands",
    "read_goal",
    "referenced_constants",
    "resolve_name",
    "scopes_at_end",
    "signature_type",
    "sorry_goal",
    "statement_features",
    "statement_shape",
    "statement_key",
    "statement_parts",
    "strip_comments",
    "operand_start",
    "term_atoms",
    "unread_command_lines",
    "unsolved_goals",
    "without_imports",
    "without_repeated",
]
