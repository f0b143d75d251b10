"""What both fuzzers share: outcome classes, the run report, saved failures.

An outcome is one of:
  ok        the tool accepted the input (and, for kernels, ptxas too)
  rejected  a clean refusal: exit 1 with an `error:` diagnostic from
            tilemega-opt, or a TileLang / ValueError / TypeError / CompileError
            from the Python frontend
and everything else is a failure the fuzzers exist to find:
  crash     the process died on a signal (SIGSEGV, SIGABRT, ...)
  assert    an assertion / LLVM fatal error / stack dump in the output
  hang      no answer within the per-input timeout
  silent    a non-zero exit without any diagnostic
  internal  (kernels) a Python exception that is not a clean refusal
  ptxas     (kernels) ptxas rejected PTX that our pipeline emitted
"""

from __future__ import annotations

import collections
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Dict, List

CLEAN = ("ok", "rejected")

# Text that only a crashing or aborting LLVM/MLIR tool prints.
_ABORT_MARKERS = re.compile(
    r"Assertion .* failed|LLVM ERROR|Stack dump:|UNREACHABLE executed|"
    r"PLEASE submit a bug report|Segmentation fault|Aborted \(core dumped\)")


def classify_process(returncode: int, output: str) -> str:
    """The outcome of one finished tool run (a timeout is classified by the caller)."""
    if _ABORT_MARKERS.search(output):
        return "assert" if returncode >= 0 else "crash"
    if returncode < 0:
        return "crash"
    if returncode == 0:
        return "ok"
    if returncode == 1 and re.search(r"\berror:", output):
        return "rejected"
    return "silent"


def failure_signature(output: str) -> str:
    """A short key that groups failures with the same cause (for the summary)."""
    for pattern in (r"Assertion `[^`]*' failed", r"LLVM ERROR: [^\n]*",
                    r"UNREACHABLE executed[^\n]*", r"#\d+ 0x[0-9a-f]+ (\S+)"):
        m = re.search(pattern, output)
        if m:
            return (m.group(1) if m.groups() else m.group(0))[:160]
    lines = [l for l in output.splitlines() if l.strip()]
    return lines[-1][:160] if lines else "(no output)"


@dataclass
class Failure:
    kind: str          # crash / assert / hang / silent / internal / ptxas
    label: str         # which input (corpus chunk and mutations, or kernel spec)
    path: str          # folder holding the input, the command and the output
    signature: str


@dataclass
class Report:
    name: str
    seed: int
    budget_seconds: float
    inputs: int = 0
    seconds: float = 0.0
    outcomes: Dict[str, collections.Counter] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter))
    failures: List[Failure] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def count(self, mode: str, outcome: str) -> None:
        self.outcomes[mode][outcome] += 1

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    def summary(self) -> str:
        rate = self.inputs / self.seconds if self.seconds else 0.0
        lines = [f"{self.name}: seed {self.seed}, budget {self.budget_seconds:g} s: "
                 f"{self.inputs} inputs in {self.seconds:.1f} s ({rate:.1f} inputs/s)"]
        for mode in sorted(self.outcomes):
            counts = self.outcomes[mode]
            text = ", ".join(f"{k} {counts[k]}" for k in sorted(counts))
            lines.append(f"  {mode}: {sum(counts.values())} runs: {text}")
        lines.extend(f"  note: {n}" for n in self.notes)
        if self.failures:
            lines.append(f"  FAILURES ({len(self.failures)}):")
            for f in self.failures:
                lines.append(f"    {f.kind}: {f.label}: {f.signature} -> {f.path}")
        else:
            lines.append("  no crash, no hang, no assertion")
        return "\n".join(lines)


class FailureStore:
    """Saves each failing input in its own folder under `root`: the input,
    the command that reproduces it, the tool's output. Keeps at most
    `per_signature` folders per failure signature so one bug does not fill the disk."""

    def __init__(self, root: str, per_signature: int = 5):
        self.root = root
        self.per_signature = per_signature
        self._seen = collections.Counter()
        self._n = 0

    def save(self, kind: str, signature: str, files: Dict[str, str],
             meta: Dict[str, object]) -> str:
        self._seen[(kind, signature)] += 1
        if self._seen[(kind, signature)] > self.per_signature:
            return "(not saved: same signature as an earlier failure)"
        self._n += 1
        path = os.path.join(self.root, f"{self._n:04d}-{kind}")
        os.makedirs(path, exist_ok=True)
        for name, text in files.items():
            with open(os.path.join(path, name), "w") as f:
                f.write(text)
        with open(os.path.join(path, "meta.json"), "w") as f:
            json.dump({"kind": kind, "signature": signature, **meta}, f, indent=2)
        return path


class Budget:
    """A wall-clock budget: `left()` seconds remain until `expired()`."""

    def __init__(self, seconds: float):
        self.start = time.monotonic()
        self.end = self.start + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def expired(self) -> bool:
        return time.monotonic() >= self.end

    def elapsed(self) -> float:
        return time.monotonic() - self.start
