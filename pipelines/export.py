"""`python -m pipelines.export run_dir=DIR format=parquet|jsonl`: training corpora from a run, under DIR/export/.

Writes `pairs/`, `trajectories/` and `judge/`, each as `train.EXT` and `test.EXT` (a split that would be
empty is not written); `README.md`, a Hugging Face dataset card whose YAML header declares one config per
corpus (its split files and features) and whose text names only the splits written, so
`datasets.load_dataset(EXPORT_DIR, "pairs")` reads it without custom code; `lean/SEED.lean`, one readable file
per seed with its proved lemmas; `contributions/`, once `contribute` ran, what it would offer Mathlib, lemma by
lemma; and `manifest.json` with the counts, the dropped duplicates and the split rule. With
`decontaminate.benchmarks=[...]`, every row of a candidate whose statement restates a benchmark problem goes to
`excluded/` with the reason instead (`pipelines.decontaminate`), and the card names the benchmarks, their revisions,
the rows removed and the method. A simulated run is refused unless `allow_sim=true`:
scripted answers must never end up in a training set by accident, and the card of one that is exported says
`simulated: true`.
"""

from __future__ import annotations

from lean_pool.command_line import hold_stops

if __name__ == "__main__":
    hold_stops()  # the imports below take seconds: a Ctrl-C or SIGTERM meanwhile stops the job in one line

import io
import json
import sys
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from omegaconf import DictConfig, OmegaConf

from operators.decontaminate import Verdict
from operators.rows.candidates import PROVED
from operators.rows.contributions import CONTRIBUTION_SCHEMA
from operators.storage import join
from pipelines.reporting import corpora
from pipelines.reporting.run_data import RunData, RunNotFound, load_run
from pipelines.reporting.seed_lean_file import ProvedLemma, namespace_for, seed_file
from pipelines.reporting.summary import Closing, closing_lines
from pipelines.runtime.benchmarks import decontaminator, method_description
from pipelines.runtime.cli import compose_config, run_job
from pipelines.runtime.outputs import run_output
from pipelines.runtime.run_dir import RunDir

# The job's name, as its output folder's marker says it.
JOB = "export"
FORMATS = {"parquet": "parquet", "jsonl": "jsonl"}
CARD_FILE = "README.md"
# The names `datasets` gives the Arrow types the corpora use, in a card's `dataset_info.features`.
CARD_DTYPES = {pa.string(): "string", pa.bool_(): "bool", pa.int32(): "int32"}
# A card's table cell for a split the corpus has no file for.
NONE = "—"
MINING_SECTIONS = ("prompts", "formalize", "prove")
EXCLUDED = "excluded"
CONTRIBUTIONS = "contributions"
# What an export ships of `contributions/` (when `contribute` ran): each lemma offered or not, where, under which
# name, with which proof, and why; not what it cost.
CONTRIBUTION_COLUMNS = ("candidate_id", "seed_id", "file", "line", "namespace", "section", "anchor", "old_name",
                        "new_name", "name_ok", "name_reasons", "name_source", "statement", "proof_offered",
                        "proof_tactic", "proof_chars", "mined_proof_chars", "faithfulness_score", "models", "status",
                        "reason", "patch", "run_id", "simulated")
EXCLUDED_SCHEMA = pa.schema([("id", pa.string()), ("corpus", pa.string()), ("candidate_id", pa.string()),
                             ("split", pa.string()), ("statement", pa.string()), ("benchmark", pa.string()),
                             ("benchmark_problem", pa.string()), ("match_kind", pa.string()),
                             ("match_score", pa.float64()), ("reason", pa.string())])


class ExportRefused(RuntimeError):
    """The export was not allowed as asked (a simulated run without `allow_sim=true`, an unknown format)."""


def mining_config(run: RunData) -> dict[str, Any]:
    """The prompts, formalize and prove settings the run used (from its manifest), else the packaged defaults."""
    if all(section in run.config for section in MINING_SECTIONS):
        return {section: run.config[section] for section in MINING_SECTIONS}
    defaults = compose_config("mine", [], complete=False)
    return {section: OmegaConf.to_container(defaults[section], resolve=True) for section in MINING_SECTIONS}


def corpus_rows(run: RunData, cfg: Mapping[str, Any], mining: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every exported row of each corpus, before deduplication."""
    fraction, salt = float(cfg["split"]["test_fraction"]), str(cfg["split"]["salt"])
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in corpora.SCHEMAS}
    for row in run.candidates.iter_rows(named=True):
        split = corpora.split_of(row["seed_id"], fraction, salt)
        rows["pairs"] += corpora.pair_rows(row, split, mining["prove"]["env_lines"])
        rows["trajectories"] += corpora.trajectory_rows(row, split, mining, cfg["trajectories"]["feedback"])
        rows["judge"] += corpora.judge_rows(row, split)
    return rows


def contaminated_candidates(run: RunData, section: Mapping[str, Any]) -> tuple[dict[str, Verdict], dict[str, Any]]:
    """Candidate id -> verdict for each candidate whose statement (compiled, else raw) restates a problem of the
    configured benchmarks, and what the card and manifest say of the check (benchmarks, revisions, method)."""
    judge = decontaminator(section, section["embedding"])
    rows = run.candidates.select("candidate_id", "statement", "statement_raw").to_dicts()
    verdicts = judge.judge([row["statement"] or row["statement_raw"] for row in rows])
    found = {row["candidate_id"]: v for row, v in zip(rows, verdicts, strict=True) if v.contaminated}
    described = {"benchmarks": [{"name": b.name, "location": b.location, "revision": b.revision,
                                 "revision_source": b.revision_source, "problems": len(b.problems)}
                                for b in judge.benchmarks],
                 "method": method_description(judge.settings), "candidates_removed": len(found)}
    return found, described


def excluded_rows(name: str, rows: Sequence[Mapping[str, Any]], contaminated: Mapping[str, Verdict]
                  ) -> list[dict[str, Any]]:
    """The rows of corpus `name` whose candidate restates a benchmark problem, as rows of `excluded/`."""
    excluded = []
    for row in rows:
        verdict = contaminated.get(row["candidate_id"])
        if verdict is not None:
            excluded.append({"id": row["id"], "corpus": name, "candidate_id": row["candidate_id"],
                             "split": row["split"], "statement": row.get("statement"), "benchmark": verdict.benchmark,
                             "benchmark_problem": verdict.problem, "match_kind": verdict.kind,
                             "match_score": verdict.score, "reason": verdict.reason()})
    return excluded


def lean_files(run: RunData, cfg: Mapping[str, Any], mining: Mapping[str, Any], left_out: Collection[str] = ()
               ) -> dict[str, str]:
    """Seed id -> the Lean file of its proved lemmas (clean proofs only, best first within a candidate), without the
    candidates in `left_out`."""
    by_seed: dict[str, list[ProvedLemma]] = {}
    provenance: dict[str, Mapping[str, Any]] = {}
    for row in run.candidates.filter(run.candidates["status"] == PROVED).sort("candidate_id").iter_rows(named=True):
        if row["candidate_id"] in left_out:
            continue
        clean = [p for p in row["proofs"] or [] if corpora.clean_proof(row["statement"], p)]
        if not clean:
            continue
        best = min(clean, key=lambda p: p["success_at"])
        by_seed.setdefault(row["seed_id"], []).append(
            ProvedLemma(row["candidate_id"], best["proof"], best["role"], best["model"], best["success_at"]))
        provenance[row["seed_id"]] = row["provenance"] or {}
    lean = cfg["lean_files"]
    files = {}
    for seed_id, lemmas in by_seed.items():
        origin = provenance[seed_id]
        header = lean["header"].format(seed_id=seed_id, count=len(lemmas), run_id=origin.get("run_id"),
                                       toolchain=origin.get("toolchain"), mathlib_rev=origin.get("mathlib_rev"))
        namespace = namespace_for(seed_id, lean["namespace_root"], lean["dropped_prefix"])
        files[seed_id] = seed_file(seed_id, namespace, lemmas, mining["prove"]["env_lines"], header)
    return files


def encode(rows: Sequence[dict[str, Any]], schema: pa.Schema, fmt: str) -> bytes:
    """Rows as one Parquet file or as JSON lines (one object per line, UTF-8)."""
    if fmt == "parquet":
        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(list(rows), schema=schema), buffer)
        return buffer.getvalue()
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def card_feature(name: str, dtype: pa.DataType) -> dict[str, Any]:
    """One column as `datasets` writes it in a card's features: `dtype` for a scalar, `list` of the element's
    fields for a list of structs (the chat messages)."""
    if dtype in CARD_DTYPES:
        return {"name": name, "dtype": CARD_DTYPES[dtype]}
    if pa.types.is_list(dtype) and pa.types.is_struct(dtype.value_type):
        return {"name": name, "list": [card_feature(field.name, field.type) for field in dtype.value_type]}
    raise ValueError(f"column {name}: no dataset card type for Arrow type {dtype}")


def card_header(manifest: Mapping[str, Any], card: Mapping[str, Any]) -> dict[str, Any]:
    """The card's YAML metadata: license, the `simulated` flag, and per corpus with rows a config listing its
    split files and a `dataset_info` entry with its features (a corpus without rows has none). Split sizes are
    left to the card's text: `datasets` wants their size in bytes as it would hold them, which only it knows."""
    extension = FORMATS[manifest["format"]]
    configs, infos = [], []
    for name, counts in manifest["corpora"].items():
        splits = [split for split in (corpora.TRAIN, corpora.TEST) if counts[split]]
        if not splits:
            continue
        configs.append({"config_name": name,
                        "data_files": [{"split": split, "path": f"{name}/{split}.{extension}"} for split in splits]})
        infos.append({"config_name": name,
                      "features": [card_feature(field.name, field.type) for field in corpora.SCHEMAS[name]]})
    tags = [*card["tags"], *(["simulated"] if manifest["simulated"] else [])]
    return {"license": card["license"], "pretty_name": card["pretty_name"].format(run_id=manifest["run_id"]),
            "simulated": manifest["simulated"], "tags": tags, "configs": configs, "dataset_info": infos}


def written_splits(manifest: Mapping[str, Any]) -> list[str]:
    """The splits that have a file in some corpus, in train-then-test order: the only splits the card may name."""
    return [split for split in (corpora.TRAIN, corpora.TEST)
            if any(counts[split] for counts in manifest["corpora"].values())]


def splits_phrase(splits: Sequence[str]) -> str:
    """What the export holds, in words for the card (`the train split only`, `the train and test splits`)."""
    if not splits:
        return "no split: no corpus has a row"
    if len(splits) == 1:
        return f"the {splits[0]} split only"
    return f"the {' and '.join(splits)} splits"


def counts_table(manifest: Mapping[str, Any], splits: Sequence[str]) -> str:
    """Rows per corpus and written split (a dash where that corpus has no file for it), and duplicates dropped."""
    rows = [["config", *splits, "exact duplicates dropped"], ["---"] * (len(splits) + 2)]
    rows += [[f"`{name}`", *(str(c[split]) if c[split] else NONE for split in splits), str(c["duplicates_dropped"])]
             for name, c in manifest["corpora"].items()]
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def decontamination_text(manifest: Mapping[str, Any], card: Mapping[str, Any]) -> str:
    """The card's paragraph on benchmark decontamination: the benchmarks and revisions, the rows removed per corpus,
    the method; or that there was none."""
    checked = manifest.get("decontamination")
    if not checked:
        return card["not_decontaminated"]
    benchmarks = ", ".join(f"`{b['name']}` ({b['problems']} problems, {b['revision_source']} {b['revision']})"
                           for b in checked["benchmarks"])
    removed = ", ".join(f"{c['benchmark_removed']} `{name}` rows" for name, c in manifest["corpora"].items())
    removed += f" of {checked['candidates_removed']} candidates"
    return card["decontamination"].format(benchmarks=benchmarks, removed=removed, method="; ".join(checked["method"]))


def dataset_card(manifest: Mapping[str, Any], card: Mapping[str, Any]) -> str:
    """README.md of the export: the YAML header `datasets` and the Hub read, then what each corpus holds, where
    it comes from and how to load it. The text names only the splits written, as the header lists them."""
    header = card_header(manifest, card)
    splits = written_splits(manifest)
    body = card["body"].format(pretty_name=header["pretty_name"], source_run=manifest["source_run"],
                               run_id=manifest["run_id"], counts=counts_table(manifest, splits),
                               splits=splits_phrase(splits), decontamination=decontamination_text(manifest, card),
                               test_fraction=manifest["split"]["test_fraction"], salt=manifest["split"]["salt"],
                               simulated=card["simulated_notice"] + "\n\n" if manifest["simulated"] else "")
    return f"---\n{OmegaConf.to_yaml(header)}---\n\n{body.strip()}\n"


def export(run: RunData, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Write the corpora and Lean files of `run` into its export folder (`out_subdir`), in place of an earlier export
    (a corpus, split or Lean file this one leaves out must not stay beside it); returns the manifest written."""
    fmt = str(cfg["format"])
    if fmt not in FORMATS:
        raise ExportRefused(f"format={fmt} is not one of {sorted(FORMATS)}")
    if run.simulated and not cfg["allow_sim"]:
        raise ExportRefused(f"{run.uri} is a simulated run (scripted LLM or Lean): its rows are not training data. "
                            "Pass allow_sim=true to export it anyway, marked simulated.")
    output = run_output(RunDir(run.uri), "out_subdir", str(cfg["out_subdir"]), JOB)
    output.check_own()
    mining = mining_config(run)

    def put(relative: str, data: bytes) -> None:
        directory = f"{output.path}/{relative}".rsplit("/", 1)[0]
        output.filesystem.create_dir(directory, recursive=True)
        with output.filesystem.open_output_stream(f"{output.path}/{relative}") as stream:
            stream.write(data)

    manifest: dict[str, Any] = {"source_run": run.uri, "run_id": run.manifest.get("run_id"),
                                "simulated": run.simulated, "format": fmt,
                                "split": {"by": "seed_id", **dict(cfg["split"])}, "corpora": {}}
    contaminated: dict[str, Verdict] = {}
    if cfg["decontaminate"]["benchmarks"]:
        contaminated, manifest["decontamination"] = contaminated_candidates(run, cfg["decontaminate"])
    excluded = []
    output.empty()
    for name, rows in corpus_rows(run, cfg, mining).items():
        removed = excluded_rows(name, rows, contaminated)
        excluded += removed
        rows = [row for row in rows if row["candidate_id"] not in contaminated]
        kept, dropped = corpora.deduplicate(rows, corpora.DEDUP_KEYS[name])
        counts = {}
        for split in (corpora.TRAIN, corpora.TEST):
            part = [row for row in kept if row["split"] == split]
            counts[split] = len(part)
            if part:
                put(f"{name}/{split}.{FORMATS[fmt]}", encode(part, corpora.SCHEMAS[name], fmt))
        manifest["corpora"][name] = {**counts, "duplicates_dropped": dropped}
        if "decontamination" in manifest:
            manifest["corpora"][name]["benchmark_removed"] = len(removed)
    if excluded:
        put(f"{EXCLUDED}/{EXCLUDED}.{FORMATS[fmt]}", encode(excluded, EXCLUDED_SCHEMA, fmt))
    if run.contributions is not None:
        offered = run.contributions.filter(~pl.col("candidate_id").is_in(list(contaminated)))
        schema = pa.schema([CONTRIBUTION_SCHEMA.field(name) for name in CONTRIBUTION_COLUMNS])
        put(f"{CONTRIBUTIONS}/{CONTRIBUTIONS}.{FORMATS[fmt]}",
            encode(offered.select(CONTRIBUTION_COLUMNS).to_dicts(), schema, fmt))
        manifest[CONTRIBUTIONS] = dict(Counter(offered["status"].to_list()))
    files = lean_files(run, cfg, mining, contaminated)
    for seed_id, text in files.items():
        put(f"lean/{seed_id}.lean", text.encode())
    manifest["lean_files"] = sorted(files)
    put(CARD_FILE, dataset_card(manifest, cfg["card"]).encode())
    put("manifest.json", json.dumps(manifest, indent=2).encode())
    return manifest


def export_closing(run_uri: str, out_subdir: str, manifest: Mapping[str, Any]) -> Closing:
    """The export's closing block: each corpus with the rows of the splits it wrote, the Lean files, the card."""
    written = {}
    for name, counts in manifest["corpora"].items():
        splits = ", ".join(f"{counts[split]} {split}" for split in (corpora.TRAIN, corpora.TEST) if counts[split])
        dropped = f", {counts['duplicates_dropped']} duplicates dropped" if counts["duplicates_dropped"] else ""
        if splits:
            written[f"{name}/"] = (join(run_uri, out_subdir, name), f"rows: {splits}{dropped}")
    if manifest.get("decontamination"):
        removed = sum(counts["benchmark_removed"] for counts in manifest["corpora"].values())
        if removed:
            written[f"{EXCLUDED}/"] = (join(run_uri, out_subdir, EXCLUDED),
                                       f"{removed} rows restating a benchmark problem")
    if CONTRIBUTIONS in manifest:
        counts = ", ".join(f"{count} {status}" for status, count in manifest[CONTRIBUTIONS].items())
        written[f"{CONTRIBUTIONS}/"] = (join(run_uri, out_subdir, CONTRIBUTIONS), f"lemmas: {counts or 'none'}")
    if manifest["lean_files"]:
        files = f"{len(manifest['lean_files'])} Lean files, one per seed"
        written["lean/"] = (join(run_uri, out_subdir, "lean"), files)
    written[CARD_FILE] = (join(run_uri, out_subdir, CARD_FILE), "dataset card")
    return Closing(run_uri, written, simulated=manifest["simulated"])


def main(argv: Sequence[str] | None = None) -> int:
    """Export a run's corpora; exit 2 when there is no run or the export is refused."""

    def run_export() -> None:
        cfg: DictConfig = compose_config("export", sys.argv[1:] if argv is None else argv)
        run = load_run(str(cfg.run_dir))
        manifest = export(run, cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True)))
        print("\n".join(closing_lines(export_closing(run.uri, str(cfg.out_subdir), manifest))), flush=True)

    return run_job(run_export, (RunNotFound, ExportRefused),
                   interrupted="the export may be incomplete; run the same command again")


if __name__ == "__main__":
    sys.exit(main())
