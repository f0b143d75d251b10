#!/usr/bin/env python3
"""Mutation fuzzing of tilemega-opt with the lit corpus.

Every `.mlir` file under test/ is split at its `// -----` markers; each input
is one chunk with 1-4 random mutations (lines deleted, duplicated, swapped or
spliced in from another chunk; integers, shapes and element types changed to
edge values; attributes deleted; swizzle / layout / trigger / stage numbers
corrupted; SSA operands swapped; the text truncated). Each input goes through

  parse     tilemega-opt (parse, verify, print)
  passes    the pass list of a RUN line of the chunk's file (e.g.
            -tile-infer-layouts -convert-tile-to-gpu), when it has one
  pipeline  --tilemega-tile-to-ptx-pipeline with one of a few option sets

under a timeout. A clean run exits 0, or 1 with an `error:` diagnostic;
anything else (signal, assertion, LLVM fatal error, stack dump, timeout, exit
without diagnostic) is a failure, saved with its command under --out.
Input i of seed s is the same on every machine: `--seed s --first i
--max-inputs 1` replays it.

    python scripts/fuzz/fuzz_opt.py --budget-seconds 600 --seed 7
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_common import Budget, Failure, FailureStore, Report, classify_process, \
    failure_signature  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PIPELINE = "tilemega-tile-to-ptx-pipeline"
PIPELINE_OPTIONS = [
    "chip=sm_90a",
    "chip=sm_90a mega-policy=jit",
    "chip=sm_90a mega-policy=aot mega-max-ctas=3 mega-prefetch-bytes=256",
    "chip=sm_90a opt-level=0 mega-timeline=true",
    "chip=sm_90a mega-policy=aot mega-pair-entries=true",
]
# The driver's own flags, not passes: they do not make a pass list.
_DRIVER_FLAGS = {"-split-input-file", "--split-input-file", "-verify-diagnostics",
                 "--verify-diagnostics", "-allow-unregistered-dialect"}
# Memory cap of one tilemega-opt run: a mutated shape must not take the
# (shared) machine down; running out is an `LLVM ERROR`, i.e. a failure.
MEMORY_LIMIT_BYTES = 4 << 30

EDGE_INTS = [0, 1, -1, 2, 3, 7, 31, 32, 33, 63, 64, 127, 128, 255, 256, 1023, 1024, 4096,
             65535, 65536, 2**31 - 1, 2**31, 2**32, 2**63 - 1, -2**63, 10**20]
EDGE_DIMS = [0, 1, 2, 3, 7, 16, 33, 100, 4096, 65536, 2**31, 2**40]
TYPES = ["f16", "bf16", "f32", "f64", "i1", "i8", "i16", "i32", "i64", "index"]
# Words that may replace one another where they stand.
KEYWORD_SETS = [
    ["sum", "max", "min", "absmax"],
    ["#gpu.address_space<workgroup>", "#tile.fragment", "#gpu.address_space<global>"],
    ["aot", "jit", "auto"],
    ["tile.copy", "tile.gemm", "tile.reduce", "tile.atomic", "tile.fill", "tile.clear"],
    ["read", "write"],
    ["transpose_a", "transpose_b", "clear_accum", "clear"],
]


@dataclass
class Chunk:
    file: str           # relative to the repository root
    index: int          # which `// -----` chunk of the file
    text: str
    pass_lists: List[List[str]]


# ---------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------

def _run_line_pass_lists(text: str) -> List[List[str]]:
    """The pass flags of each `// RUN: tilemega-opt %s ...` line that is
    expected to succeed (no `not`), without the driver's own flags."""
    out = []
    for m in re.finditer(r"^// RUN: (.*)$", text, re.M):
        line = m.group(1)
        if not line.startswith("tilemega-opt %s"):
            continue
        command = re.split(r"\s[|>]\s?", line)[0]
        try:
            words = shlex.split(command)[2:]
        except ValueError:
            continue
        passes = [w for w in words if w.startswith("-") and w not in _DRIVER_FLAGS
                  and PIPELINE not in w]
        if passes and passes not in out:
            out.append(passes)
    return out


def load_corpus(root: str = ROOT) -> List[Chunk]:
    chunks = []
    for path in sorted(glob.glob(os.path.join(root, "test", "**", "*.mlir"), recursive=True)):
        with open(path) as f:
            text = f.read()
        rel = os.path.relpath(path, root)
        pass_lists = _run_line_pass_lists(text)
        for i, part in enumerate(re.split(r"^// -----\s*$", text, flags=re.M)):
            # Comments (RUN / CHECK / expected-error lines) are not input the
            # parser reads: mutating them would be wasted work.
            body = "\n".join(l for l in part.splitlines() if not l.lstrip().startswith("//"))
            if body.strip():
                chunks.append(Chunk(rel, i, body.strip() + "\n", pass_lists))
    if not chunks:
        raise SystemExit(f"fuzz_opt: no .mlir files under {root}/test")
    return chunks


# ---------------------------------------------------------------------------
# Mutations: each takes (rng, text, corpus) and returns the new text and a
# short description, or None when it does not apply to this text.
# ---------------------------------------------------------------------------

_INT = re.compile(r"(?<![\w%#.\-])-?\d+(?![\w.])")
_SHAPE = re.compile(r"(?<=<)((?:(?:\d+|\?)x)+)(?=[a-z!])")
_TYPE = re.compile(r"\b(" + "|".join(TYPES) + r")\b")
_ATTR_ENTRY = re.compile(r"\b[a-zA-Z_][\w.]* = [^,{}<>\n]+(?:<[^<>\n]*>)?,? ?")
_ATTR_DICT = re.compile(r" ?\{[^{}\n]*\}(?!\n)")
_SSA = re.compile(r"%[\w.$-]+")
# Lines whose numbers matter most: layouts, swizzles, triggers, stages, threads.
_HOT_LINE = re.compile(r"#tile\.|#mega\.|trigger|num_stages|threads|mega\.|swizzle|layout")


def _lines(text):
    return text.split("\n")


def _pick_match(rng, pattern, text, prefer=None):
    matches = list(pattern.finditer(text))
    if not matches:
        return None
    if prefer is not None and rng.random() < 0.6:
        hot = [m for m in matches
               if prefer.search(text[text.rfind("\n", 0, m.start()) + 1:
                                     text.find("\n", m.end()) % (len(text) + 1)])]
        if hot:
            return rng.choice(hot)
    return rng.choice(matches)


def m_delete_line(rng, text, corpus):
    lines = _lines(text)
    i = rng.randrange(len(lines))
    return "\n".join(lines[:i] + lines[i + 1:]), f"delete line {i + 1}"


def m_duplicate_line(rng, text, corpus):
    lines = _lines(text)
    i = rng.randrange(len(lines))
    return "\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]), f"duplicate line {i + 1}"


def m_swap_lines(rng, text, corpus):
    lines = _lines(text)
    if len(lines) < 2:
        return None
    i = rng.randrange(len(lines) - 1)
    j = i + 1 if rng.random() < 0.5 else rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines), f"swap lines {i + 1} and {j + 1}"


def m_splice_line(rng, text, corpus):
    other = _lines(rng.choice(corpus).text)
    line = rng.choice(other)
    lines = _lines(text)
    i = rng.randrange(len(lines) + 1)
    return "\n".join(lines[:i] + [line] + lines[i:]), f"insert a foreign line at {i + 1}"


def m_truncate(rng, text, corpus):
    # A text emptied by earlier mutations has nothing left to cut.
    n = rng.randrange(len(text)) if text else 0
    return text[:n], f"truncate at char {n}"


def m_edge_int(rng, text, corpus):
    m = _pick_match(rng, _INT, text, prefer=_HOT_LINE)
    if m is None:
        return None
    v = rng.choice(EDGE_INTS)
    line = text.count("\n", 0, m.start()) + 1
    return text[:m.start()] + str(v) + text[m.end():], f"int {m.group(0)} -> {v} (line {line})"


def m_shape(rng, text, corpus):
    m = _pick_match(rng, _SHAPE, text)
    if m is None:
        return None
    dims = m.group(1).split("x")[:-1]
    r = rng.random()
    if r < 0.6:
        i = rng.randrange(len(dims))
        dims[i] = str(rng.choice(EDGE_DIMS))
    elif r < 0.8 or len(dims) == 1:
        dims.insert(rng.randrange(len(dims) + 1), str(rng.choice(EDGE_DIMS)))
    else:
        del dims[rng.randrange(len(dims))]
    new = "".join(d + "x" for d in dims)
    line = text.count("\n", 0, m.start()) + 1
    return (text[:m.start()] + new + text[m.end():],
            f"shape {m.group(1)} -> {new} (line {line})")


def m_type(rng, text, corpus):
    m = _pick_match(rng, _TYPE, text)
    if m is None:
        return None
    t = rng.choice([t for t in TYPES if t != m.group(1)])
    line = text.count("\n", 0, m.start()) + 1
    return text[:m.start()] + t + text[m.end():], f"type {m.group(1)} -> {t} (line {line})"


def m_delete_attr(rng, text, corpus):
    pattern = _ATTR_DICT if rng.random() < 0.3 else _ATTR_ENTRY
    m = _pick_match(rng, pattern, text, prefer=_HOT_LINE)
    if m is None:
        return None
    line = text.count("\n", 0, m.start()) + 1
    return (text[:m.start()] + text[m.end():],
            f"delete {m.group(0).strip()[:40]!r} (line {line})")


def m_keyword(rng, text, corpus):
    options = [(s, w) for s in KEYWORD_SETS for w in s if w in text]
    if not options:
        return None
    words, word = rng.choice(options)
    starts = [m.start() for m in re.finditer(re.escape(word), text)]
    at = rng.choice(starts)
    new = rng.choice([w for w in words if w != word])
    line = text.count("\n", 0, at) + 1
    return text[:at] + new + text[at + len(word):], f"{word} -> {new} (line {line})"


def m_swap_operand(rng, text, corpus):
    uses = [m for m in _SSA.finditer(text)
            if not re.match(r"\s*=", text[m.end():m.end() + 3])]
    names = sorted({m.group(0) for m in _SSA.finditer(text)})
    if not uses or len(names) < 2:
        return None
    m = rng.choice(uses)
    new = rng.choice([n for n in names if n != m.group(0)])
    line = text.count("\n", 0, m.start()) + 1
    return text[:m.start()] + new + text[m.end():], f"operand {m.group(0)} -> {new} (line {line})"


# Float for float, integer for integer: literals stay parseable.
_TYPE_FAMILIES = [["f16", "bf16", "f32", "f64"], ["i1", "i8", "i16", "i32", "i64"], ["index"]]


def m_type_everywhere(rng, text, corpus):
    present = sorted({m.group(1) for m in _TYPE.finditer(text)})
    if not present:
        return None
    old = rng.choice(present)
    family = next(f for f in _TYPE_FAMILIES if old in f)
    if len(family) < 2:
        return None
    new = rng.choice([t for t in family if t != old])
    return _TYPE.sub(lambda m: new if m.group(1) == old else m.group(0), text), \
        f"type {old} -> {new} everywhere"


_NUMBER = re.compile(r"(?<![\w%#.\-])\d+(?=x|\b)(?![.])")


def m_number_everywhere(rng, text, corpus):
    """One number changed everywhere (shapes, constants, tile sizes alike),
    so the IR stays consistent more often than with one edit."""
    present = sorted({int(m.group(0)) for m in _NUMBER.finditer(text)} - {0})
    if not present:
        return None
    old = rng.choice(present)
    new = rng.choice([1, 2, 3, 8, 16, 24, 32, 48, 96, 100, 128, 256, 512, old * 2,
                      max(1, old // 2), old + 1])
    if new == old:
        return None
    pattern = re.compile(rf"(?<![\w%#.\-]){old}(?=x|\b)(?![.])")
    return pattern.sub(str(new), text), f"number {old} -> {new} everywhere"


MUTATIONS = [m_type_everywhere, m_type_everywhere, m_number_everywhere,
             m_number_everywhere, m_number_everywhere, m_delete_line, m_duplicate_line, m_swap_lines, m_splice_line, m_truncate,
             m_edge_int, m_edge_int, m_edge_int, m_shape, m_shape, m_type, m_type,
             m_delete_attr, m_delete_attr, m_keyword, m_swap_operand, m_swap_operand]


def make_input(seed: int, index: int, corpus: List[Chunk]) -> Tuple[Chunk, str, List[str]]:
    """Input `index` of `seed`: a corpus chunk and 1-4 mutations of it."""
    rng = random.Random(f"fuzz_opt:{seed}:{index}")
    # Mostly chunks that are valid as written (mutations of those reach the
    # passes); some of the invalid.mlir chunks, for the verifiers' own paths.
    negative = [c for c in corpus if _is_negative(c)]
    positive = [c for c in corpus if not _is_negative(c)] or negative
    chunk = rng.choice(negative if negative and rng.random() < 0.15 else positive)
    text, done = chunk.text, []
    for _ in range(rng.choice([1, 1, 1, 1, 2, 2, 3])):
        for _attempt in range(5):
            mutation = rng.choice(MUTATIONS)
            if mutation is m_truncate and rng.random() < 0.7:
                continue  # a truncated input rarely gets past the parser: keep it rare
            result = mutation(rng, text, corpus)
            if result is not None:
                text = result[0]
                done.append(result[1])
                break
    return chunk, text, done


def _is_negative(chunk: Chunk) -> bool:
    return os.path.basename(chunk.file).startswith("invalid")


def commands_for(rng_seed: str, chunk: Chunk) -> List[Tuple[str, List[str]]]:
    rng = random.Random(rng_seed)
    commands = [("parse", [])]
    if chunk.pass_lists:
        commands.append(("passes", rng.choice(chunk.pass_lists)))
    commands.append(("pipeline", [f"--{PIPELINE}={rng.choice(PIPELINE_OPTIONS)}"]))
    return commands


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------

def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_tool(opt: str, args: List[str], text: str, timeout: float) -> Tuple[str, int, str]:
    """(outcome, returncode, output) of `tilemega-opt - ARGS` on `text`."""
    for attempt in range(60):
        try:
            proc = subprocess.run([opt, "-", *args], input=text, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, timeout=timeout,
                                  preexec_fn=_limit_memory, errors="replace")
            break
        except OSError:
            # The binary is being relinked by a build (shared build folder):
            # wait for it rather than report the build as a finding.
            if attempt == 59:
                raise
            time.sleep(1)
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) \
                else (e.stderr or "")
            return "hang", -9, err + f"\n(no answer after {timeout:g} s)"
    return classify_process(proc.returncode, proc.stderr), proc.returncode, proc.stderr


def find_opt() -> str:
    for candidate in (os.path.join(ROOT, "build", "bin", "tilemega-opt"),
                      shutil.which("tilemega-opt")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("fuzz_opt: tilemega-opt not found (build it: scripts/tilemega.sh build)")


def fuzz(seed: int, budget_seconds: float, out_dir: Optional[str] = None, *,
         timeout: float = 10.0, jobs: int = 1, first: int = 0,
         max_inputs: Optional[int] = None, opt: Optional[str] = None,
         log=print) -> Report:
    opt = opt or find_opt()
    corpus = load_corpus()
    out_dir = out_dir or os.path.join(tempfile.gettempdir(), f"tilemega-fuzz-opt-{seed}")
    store = FailureStore(out_dir)
    report = Report("fuzz_opt", seed, budget_seconds)
    report.notes.append(f"corpus: {len(corpus)} chunks of "
                        f"{len({c.file for c in corpus})} files; timeout {timeout:g} s")
    budget = Budget(budget_seconds)

    def one(index):
        chunk, text, mutations = make_input(seed, index, corpus)
        results = []
        for mode, args in commands_for(f"fuzz_opt:{seed}:{index}:cmd", chunk):
            outcome, rc, output = run_tool(opt, args, text, timeout)
            results.append((mode, args, outcome, rc, output))
            if mode == "parse" and outcome == "rejected":
                break  # the passes would stop at the same parse / verify error
        return index, chunk, text, mutations, results

    index = first
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        while not budget.expired():
            if max_inputs is not None and index - first >= max_inputs:
                break
            batch = range(index, index + max(1, jobs) if max_inputs is None
                          else min(index + max(1, jobs), first + max_inputs))
            index = batch.stop
            for i, chunk, text, mutations, results in pool.map(one, batch):
                report.inputs += 1
                label = f"input {i} ({chunk.file} chunk {chunk.index}: {'; '.join(mutations)})"
                for mode, args, outcome, rc, output in results:
                    report.count(mode, outcome)
                    if outcome in ("ok", "rejected"):
                        continue
                    signature = failure_signature(output)
                    command = " ".join(shlex.quote(a) for a in ["tilemega-opt", "input.mlir",
                                                                 *args])
                    path = store.save(outcome, signature, {
                        "input.mlir": text, "command.sh": command + "\n",
                        "output.txt": f"exit status {rc}\n{output}"},
                        {"seed": seed, "index": i, "file": chunk.file, "chunk": chunk.index,
                         "mutations": mutations, "mode": mode, "args": args})
                    report.failures.append(Failure(outcome, f"{label} [{mode}]", path,
                                                   signature))
                    log(f"FAILURE {outcome}: {label} [{mode}]: {signature}")
    report.seconds = budget.elapsed()
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-seconds", type=float, default=60.0)
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds one tilemega-opt run may take (default 10)")
    parser.add_argument("--jobs", type=int, default=1, help="parallel runs (default 1)")
    parser.add_argument("--first", type=int, default=0, help="index of the first input")
    parser.add_argument("--max-inputs", type=int, default=None)
    parser.add_argument("--out", default=None, help="folder for failing inputs "
                        "(default: $TMPDIR/tilemega-fuzz-opt-SEED)")
    args = parser.parse_args(argv)
    report = fuzz(args.seed, args.budget_seconds, args.out, timeout=args.timeout,
                  jobs=args.jobs, first=args.first, max_inputs=args.max_inputs)
    print(report.summary())
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
