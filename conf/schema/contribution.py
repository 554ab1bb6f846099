"""The sections `contribute` reads besides mining's: which lemmas it offers and how it names and shortens them
(`contribute`), the pull-request description (`description`), and Mathlib's naming convention (`naming`).
"""

from __future__ import annotations

from typing import Literal

from conf.schema.fields import section, setting
from conf.schema.retrieval import Resources


@section
class NameStage:
    """The `name` stage: a lemma whose mined name breaks the convention gets one proposed by a model."""

    resources: Resources = setting("the stage's Ray Data shape", speed=True)
    role: str = setting("the role of llm.models whose model proposes a new name")


@section
class ShortenStage:
    """The `shorten` stage: short closing tactics tried in place of a lemma's mined proof."""

    resources: Resources = setting("the stage's Ray Data shape", speed=True)
    tactics: list[str] = setting("closing tactics tried in place of `sorry`, shortest first; the first that passes "
                                 "replaces the mined proof")
    timeout_s: float = setting("seconds Lean may take to check one tactic", at_least=0)


@section
class ContributeSettings:
    """Which proved lemmas of a run are offered to Mathlib, and how each is named, shortened and checked in its file."""

    dropped_context: list[str] = setting("prefixes of the prover's environment lines never carried into a Mathlib file")
    file_timeout_s: float = setting("seconds Lean may take to check a whole patched file", at_least=0)
    min_faithfulness: float = setting("a candidate whose faithfulness score is below this share (0 to 1) is not "
                                      "offered; an unscored one is", at_least=0, at_most=1)
    name: NameStage = setting("the `name` stage: a new name for a lemma whose mined name breaks the convention")
    shorten: ShortenStage = setting("the `shorten` stage: short closing tactics tried in place of the mined proof")
    statuses: list[Literal["discovered", "duplicate", "contaminated", "rejected_by_judge", "not_compilable",
                           "unfaithful", "trivial", "compiled", "proved", "error_infra"]] = setting(
        "candidate statuses offered; trivial rows and rows without a proof never are")


@section
class Description:
    """The templates of the pull-request description written beside each file's patch."""

    file: str = setting("one file's description; `{lemmas}` is its lemmas' blocks, `{simulated}` the notice below")
    lemma: str = setting("one lemma's block: its declaration, provenance, name, proof and faithfulness score")
    simulated: str = setting("the notice put in the description of a simulated run's patch (empty otherwise)")


@section
class Conclusion:
    """How the conclusion's head connective is found, and what a name must say of an `↔` conclusion."""

    head_order: list[str] = setting("top-level connectives, loosest first: the first outside brackets is the head")
    iff_symbol: str = setting("the connective (`↔`) of a conclusion named with `iff_word` or after its left side")
    iff_word: str = setting("the word a name of an `iff_symbol` conclusion says unless it follows the left side")
    prefixes: list[str] = setting("binders that, starting the conclusion, are its head whatever follows (∀, ∃)")
    omitted_words: list[str] = setting("conclusion words a name may leave out (`eq`); a head with one is named after "
                                       "its left side")


@section
class SpecialForm:
    """A run of a statement's atoms that Mathlib names as a whole (`0 <` is `pos`)."""

    tokens: list[str] = setting("consecutive atoms, numerals and symbols as in `symbols`; `_` matches any one")
    words: list[str] = setting("the words the form explains in a name")


@section
class Suggestion:
    """How long a name the naming checker builds itself (`suggested_name`) may be."""

    max_conclusion_words: int = setting("words a suggested name spends on the conclusion, at most", at_least=1)
    max_hypotheses: int = setting("hypotheses a suggested name names after `of`, at most", at_least=0)
    max_hypothesis_words: int = setting("words a suggested name spends on each hypothesis, at most", at_least=1)
    max_iff_right_words: int = setting("words of an `↔`'s right side a root name of one left word says after `iff` "
                                       "(`isGLB_iff_sInf_eq`); a longer right side is left out", at_least=0)
    min_constant_length: int = setting("characters a constant's name has at least; shorter ones are taken for "
                                       "variables (`a`, `p`)", at_least=1)
    comm_word: str = setting("the word after an equation's left side when its sides differ by swapped variables")
    assoc_word: str = setting("the word after an equation's left side when its sides differ by brackets alone")
    hypothesis_heads: list[str] = setting("head connectives of the hypotheses a suggested name says after `of`")
    self_word: str = setting("the word said for a variable written twice in a row (`sup_self`)")
    kept_case: list[str] = setting("constants a suggested name writes in their own case (`Icc`), not lowerCamel")
    unsaid: list[str] = setting("atoms a suggested name never says (`fun`, `=>`, a type ascription's colon)")
    congr_word: str = setting("the word after the left side when both sides say the same of other variables")
    apply_word: str = setting("the word after an equation's left side when it is a function applied to a variable, "
                              "or when a one-word left side equals a term of no word (`refl_apply : refl α x = x`)")
    eq_word: str = setting("the word between the sides of an equation whose left side says one word alone "
                           "(`range_eq_univ : range e = univ`)")
    cast_word: str = setting("the word said where a cast's bracket opens: a variable or an ascribed term ascribed "
                             "again (`succ_coe : succ (a : WithBot α)`, `coe_top : ((⊤ : Interval α) : Set α)`)")


@section
class Tolerance:
    """How many words of a long name its statement may leave unexplained."""

    min_words: int = setting("names of at least this many words get the tolerance", at_least=0)
    unexplained_words: int = setting("words such a name may hold that its statement does not explain", at_least=0)


@section
class Naming:
    """Mathlib's naming convention as the checker reads it: which words of a name a statement explains."""

    conclusion: Conclusion = setting("how the conclusion's head is found, and what a name of an `↔` must say")
    property_words: list[str] = setting("words any name may use: properties (comm, assoc), sides, connecting words")
    leading_property_words: list[str] = setting("property words that may open a name (`symm`, `ext`); the others "
                                                "only follow the words they qualify")
    side_words: list[str] = setting("property words that may open a name whose conclusion starts with a lone "
                                    "variable, naming its side (`left_mem_Ico : a ∈ Ico a b`)")
    applied_words: list[str] = setting("property words that may open a name whose conclusion starts with a "
                                       "variable applied to something (`apply_eq_iff_eq : f x = f y ↔ x = y`)")
    dotted_leading_words: list[str] = setting("property words that may open a name in a namespace a hypothesis "
                                              "names, as dot notation does (`Codisjoint.mono_left`)")
    postfix_symbols: list[str] = setting("postfix symbols whose word a name may say where their operand starts")
    ascription_symbols: list[str] = setting("symbols of a type ascription: their word is said where its bracket opens")
    trailing_predicates: list[str] = setting("predicates a name says after the term they apply to (`Injective`)")
    free_namespaces: list[str] = setting("namespaces of a dotted name that need not name anything of the statement")
    special_forms: list[SpecialForm] = setting("runs of atoms Mathlib names as a whole (`0 <` is `pos`)")
    suggestion: Suggestion = setting("how long a name the checker builds itself may be")
    symbols: dict[str, list[str]] = setting("a symbol as written in Lean -> the words a name may use for it")
    tolerance: Tolerance = setting("how many words of a long name its statement may leave unexplained")
    role_variables: dict[str, list[str]] = setting("a structure -> the variables in its arguments a name may say, as "
                                                   "Mathlib says a Galois connection's `l` and `u` (`l_sup`)")
    word_aliases: dict[str, list[str]] = setting("a word -> the words that explain it too (`csSup` -> `sSup`, "
                                                 "`natCast` -> `cast`)")
