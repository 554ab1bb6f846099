"""The sections `contribute` reads besides mining's: naming, the contribution's own settings, the descriptions.
"""

from __future__ import annotations

from typing import Any

from conf.schema.fields import section, setting


@section
class ContributeName:
    """contribute.name"""

    resources: dict[str, Any] = setting("", speed=True)
    role: str = setting("the model role that proposes names")


@section
class ContributeShorten:
    """contribute.shorten"""

    resources: dict[str, Any] = setting("", speed=True)
    tactics: list[Any] = setting("Closing tactics tried in place of `sorry`, shortest first; the first that passes the verdict replaces a longer mined proof.")
    timeout_s: float = setting("per tactic check", at_least=0)


@section
class ContributeSettings:
    """contribute"""

    dropped_context: list[Any] = setting("Lines of the prover's environment never carried into a Mathlib file (prefixes).")
    file_timeout_s: float = setting("the whole patched file's check", at_least=0)
    min_faithfulness: float = setting("a candidate with a faithfulness score below this is not offered", at_least=0, at_most=1)
    name: ContributeName = setting("")
    shorten: ContributeShorten = setting("")
    statuses: list[Any] = setting("candidate statuses offered (trivial, duplicate and contaminated rows never are)")


@section
class Description:
    """description"""

    file: str = setting("The pull-request description of one file's patch; `{lemmas}` is one `lemma` block per lemma.")
    lemma: str = setting("")
    simulated: str = setting("")


@section
class NamingConclusion:
    """How a name must treat its statement's conclusion."""

    head_order: list[Any] = setting("Top-level connectives, loosest first: the first found outside brackets is the conclusion's head (`\u00aca \u2264 b \u2194 c` is an `\u2194`)")
    iff_symbol: str = setting("A conclusion whose top-level connective is `\u2194`: a name without `iff` must draw its words from the left side (and the property words), the way `mem_union : a \u2208 s \u222a t \u2194 a \u2208 s \u2228 a \u2208 t` does.")
    iff_word: str = setting("")
    prefixes: list[Any] = setting("")


@section
class NamingSuggestion:
    """`suggested_name`: at most this many words for the conclusion and for each hypothesis, and at most this many hypotheses named after `of`; a name of the statement shorter than `min_constant_length` is taken for a section variable (`a`, `p`), not a constant."""

    max_conclusion_words: int = setting("", at_least=1)
    max_hypotheses: int = setting("", at_least=0)
    max_hypothesis_words: int = setting("", at_least=1)
    min_constant_length: int = setting("", at_least=1)


@section
class NamingTolerance:
    """A long name may leave a few words unexplained (a notion the statement reaches only through a definition, say): names of at least `min_words` words pass with up to `unexplained_words` words the statement does not explain."""

    min_words: int = setting("", at_least=0)
    unexplained_words: int = setting("", at_least=0)


@section
class Naming:
    """naming"""

    conclusion: NamingConclusion = setting("How a name must treat its statement's conclusion.")
    property_words: list[Any] = setting("Words a name may use whatever its statement: the properties a lemma states, the roles of its sides, and the connecting words of the convention.")
    special_forms: list[Any] = setting("Word patterns Mathlib uses for a whole form rather than its symbols: `tokens` is a run of consecutive atoms of the statement (numerals and symbols as in `symbols`, `_` for any one atom), `words` what the form explains.")
    suggestion: NamingSuggestion = setting("`suggested_name`: at most this many words for the conclusion and for each hypothesis, and at most this many hypotheses named after `of`; a name of the statement shorter than `min_constant_length` is taken for a section variable (`a`, `p`), not a constant.")
    symbols: dict[str, list[str]] = setting("Symbol (as written in Lean) -> the words a name may use for it")
    tolerance: NamingTolerance = setting("A long name may leave a few words unexplained (a notion the statement reaches only through a definition, say): names of at least `min_words` words pass with up to `unexplained_words` words the statement does not explain.")
    word_aliases: dict[str, list[str]] = setting("Words explained by others the statement offers: conditionally complete lattices' `c` forms of the lattice operations, and the casts from numbers (written `\u2191n` or `(n : R)`).")
