"""The 2-D GP table at one equal CPU budget, from runs of ``gp2d.py --run-model`` (no training here).

    python benchmarks/gp2d_equal.py        # seconds; results/gp2d-equal.json and its docs section

Issue 2 asks for BSA-TNP, TE-PT-TNP and TNP-D "trained under one equal CPU budget". Those runs take
hours each on this machine, so they are made one at a time, some in stages (a run started from the
saved weights of another with ``--init-from``). This script follows each run's ``init_from`` back to
its first stage, adds up the training CPU-seconds and steps of every stage, and tabulates the runs
named in :data:`RUNS` beside the oracle, with each run's gap to the oracle. A run whose results are
not there yet is listed as pending, with the command that makes it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, save_json, update_doc_section  # noqa: E402

#: label -> (result tag ``gp2d-<tag>.json``, the command that makes it)
RUNS = {
    "BSA-TNP, position moments from 180 min": (
        "bsa-tnp-180min+pm90",
        "gp2d.py --run-model bsa-tnp --init-from benchmarks/out/gp2d-bsa-tnp-180min-indep-lr2e-3.geonp "
        "--position-moments 4 --budget 5400 --independent-targets --tag=-180min+pm90"),
    "TE-PT-TNP": (
        "te-pt-tnp-45+225min-indep",
        "gp2d.py --run-model te-pt-tnp --init-from benchmarks/out/gp2d-te-pt-tnp-45min-indep.geonp "
        "--budget 13500 --independent-targets --tag=-45+225min-indep"),
    "TNP-D": (
        "tnp-d-270min-indep",
        "gp2d.py --run-model tnp-d --budget 16200 --independent-targets --tag=-270min-indep"),
}
VARIANTS = ["in-domain", "shifted", "scaled", "multires", "scaled-dense"]
_SAVED = re.compile(r"gp2d-(?P<tag>.+)\.geonp$")


def stages(tag: str, results: Path = RESULTS) -> list[dict]:
    """The result of run ``tag`` and of every run it started from, first stage first.

    Raises
    ------
    FileNotFoundError
        A stage's results are missing.
    ValueError
        A stage started from weights that no ``gp2d.py --run-model`` run saved.
    """
    chain: list[dict] = []
    while tag is not None:
        path = results / f"gp2d-{tag}.json"
        if not path.exists():
            raise FileNotFoundError(f"{path.name} (not run yet)")
        res = json.loads(path.read_text())
        chain.insert(0, res)
        source = res.get("init_from")
        if source is None:
            break
        match = _SAVED.search(Path(source).name)
        if match is None:
            raise ValueError(f"{path.name} started from {source}, which is not the output of a gp2d.py run.")
        tag = match["tag"]
    return chain


def summary(label: str, tag: str, command: str, results: Path = RESULTS) -> dict:
    """One row: the last stage's scores with the CPU-seconds and steps of all stages (or ``pending``)."""
    try:
        chain = stages(tag, results)
    except FileNotFoundError as err:
        return {"label": label, "tag": tag, "pending": str(err), "command": f"python benchmarks/{command}"}
    last = chain[-1]
    return {"label": label, "tag": tag, "model": last["model"], "parameters": last["parameters"],
            "train_cpu_s": sum(s["train_cpu_s"] for s in chain), "steps": sum(s["steps"] for s in chain),
            "stages": [s.get("init_from") or "scratch" for s in chain], "scores": last["scores"]}


def markdown(data: dict) -> str:
    """The equal-budget table of docs/benchmarks.md."""
    o = data["oracle"]
    lines = [
        f"Tabulated {data['machine']['date']} by `python benchmarks/gp2d_equal.py` from the runs' own results "
        "(each trained with one torch thread on the 2-core CPU machine; dates in their JSON). Mean NLL per "
        "target point, noiseless / noisy targets; the gap is in-domain NLL minus the oracle's.",
        "",
        "| run | CPU-min (all stages) | steps | " + " | ".join(VARIANTS) + " | in-domain gap | in-domain RMSE / "
        "coverage |",
        "|---|---|---|" + "---|" * len(VARIANTS) + "---|---|",
        "| exact GP (oracle) | – | – | " + " | ".join(
            f"{o[v]['nll']:.3f} / {o[v]['nll_noisy']:.3f}" for v in VARIANTS)
        + f" | – | {o['in-domain']['rmse']:.3f} / {o['in-domain']['coverage_noisy']:.2f} |",
    ]
    for row in data["runs"]:
        if "pending" in row:
            lines.append(f"| {row['label']} | pending: `{row['command']}` |" + " |" * (len(VARIANTS) + 3))
            continue
        s, d = row["scores"], row["scores"]["in-domain"]
        gap = f"{d['nll'] - o['in-domain']['nll']:+.3f} / {d['nll_noisy'] - o['in-domain']['nll_noisy']:+.3f}"
        lines.append(f"| {row['label']} | {row['train_cpu_s'] / 60:.0f} | {row['steps']:,} | " + " | ".join(
            f"{s[v]['nll']:.3f} / {s[v]['nll_noisy']:.3f}" for v in VARIANTS)
            + f" | {gap} | {d['rmse']:.3f} / {d['coverage_noisy']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    oracle = json.loads((RESULTS / "gp2d-oracle.json").read_text())
    data = {"machine": machine(), "oracle": oracle["oracle"],
            "runs": [summary(label, tag, cmd) for label, (tag, cmd) in RUNS.items()]}
    for row in data["runs"]:
        print({k: v for k, v in row.items() if k != "scores"}, flush=True)
    save_json("gp2d-equal", data)
    update_doc_section("gp2d-equal", markdown(data))


if __name__ == "__main__":
    main()
