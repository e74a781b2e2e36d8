"""Helpers shared by the benchmark scripts: machine info, timing, results files."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import resource
import statistics
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "benchmarks.md"


def machine() -> dict:
    """Where and with what a benchmark ran."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU only"
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def timed(fn, repeats: int = 3, warmup: int = 1) -> dict:
    """Median wall and process-CPU seconds of ``fn()`` over ``repeats`` runs."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return {"wall_s": statistics.median(wall), "cpu_s": statistics.median(cpu), "repeats": repeats}


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def matmul_gflops(n: int = 4096, repeats: int = 3) -> float:
    """The float32 matmul throughput of this machine right now (median of ``repeats``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    t = timed(lambda: a @ b, repeats=repeats)
    return 2 * n**3 / t["wall_s"] / 1e9


def save_json(name: str, data: dict) -> Path:
    """Write ``benchmarks/results/<name>.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def update_doc_section(name: str, markdown: str) -> None:
    """Replace the ``<!-- name:start -->…<!-- name:end -->`` block of docs/benchmarks.md."""
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{markdown.strip()}\n{end}"
    if start in text:
        text = re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip() + f"\n\n{block}\n"
    DOC.write_text(text)
