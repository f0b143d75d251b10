"""Aligned CTA barriers under per-thread control flow in PTX.

bar.sync and its kin must be executed by every thread of the CTA at the
same instruction. Our lowering only emits them where the whole CTA runs;
LLVM's optimiser (O3 inside gpu-module-to-binary) may copy them (unrolling,
peeling: harmless) or, as it did to the first form of the claim loop,
split a loop between thread 0 and the others so that each copy of a
barrier runs in a part of the CTA only: the kernel hangs outside every
watchdog. tilemega.compile counts the barriers before and after LLVM
(tilemega-record-aligned-barriers); when LLVM returned more, this module
decides whether any of them now depends on a per-thread branch.

The analysis is a divergence analysis over the PTX's control-flow graph:
a register is per-thread ("divergent") when it derives from %tid, %laneid,
a clock, an atomic, a shuffle or vote, or a load from a per-thread address
(a load of one address is taken as one value for the CTA: the runtime's
protocol broadcasts what thread 0 reads through shared memory between
barriers), or when it is written in a block that runs under a divergent
branch. A
barrier is misplaced when its block is control dependent (post-dominator
based) on a divergent branch, or its own guard predicate is divergent.
"""
import re
from typing import Dict, List, Optional, Set, Tuple

_LABEL = re.compile(r"^(\$?[A-Za-z_][\w$]*):\s*(.*)$")
_REG = re.compile(r"%[A-Za-z_][\w]*")
_GUARD = re.compile(r"^@(!?)(%\w+)\s+(.*)$")
#: Special registers whose value differs between the threads of a CTA.
_PER_THREAD_SREGS = re.compile(r"^%(tid|laneid|warpid|globaltimer|clock|lanemask)")
#: Opcodes (their first part) whose result differs between threads whatever
#: their operands (a warp's vote or reduction differs between warps).
_PER_THREAD_OPS = {"atom", "shfl", "vote", "activemask", "match", "redux", "elect"}
#: Opcodes (their first part, or a longer prefix) with no destination.
_NO_DEST = {"st", "red", "bar", "barrier", "bra", "brx", "ret", "exit", "trap", "fence",
            "membar", "prefetch", "prefetchu", "cp", "griddepcontrol", "setmaxnreg",
            "nanosleep", "stmatrix", "tensormap"}
_NO_DEST_PREFIXES = ("wgmma.fence", "wgmma.commit_group", "wgmma.wait_group", "mbarrier.init",
                     "mbarrier.inval", "mbarrier.expect_tx", "mbarrier.complete_tx")


def _is_barrier_reduction(opcode: str) -> bool:
    """bar.red / barrier.red: a result, the same in every thread."""
    parts = opcode.split(".")
    return parts[0] in ("bar", "barrier") and "red" in parts[1:3]


class Statement:
    """One PTX statement: its guard, opcode, destination and source registers."""

    def __init__(self, text: str, line: int):
        self.line = line
        self.text = text
        self.guard: Optional[Tuple[bool, str]] = None
        m = _GUARD.match(text)
        if m:
            self.guard = (m.group(1) == "!", m.group(2))
            text = m.group(3)
        self.opcode, _, operands = text.partition(" ")
        self.operands = operands.strip()
        self.dests: List[str] = []
        self.sources: List[str] = []
        root = self.opcode.split(".")[0]
        no_dest = (root in _NO_DEST or self.opcode.startswith(_NO_DEST_PREFIXES)) and \
            not _is_barrier_reduction(self.opcode)
        if no_dest or not self.operands:
            self.sources = _REG.findall(self.operands)
        else:
            first, rest = _split_first_operand(self.operands)
            self.dests = _REG.findall(first)
            self.sources = _REG.findall(rest)
            # A store-like form whose first operand is an address: [%rd1].
            if first.startswith("["):
                self.sources += self.dests
                self.dests = []

    @property
    def per_thread(self) -> bool:
        """Whether the result differs between threads whatever the sources."""
        return self.opcode.split(".")[0] in _PER_THREAD_OPS or any(
            _PER_THREAD_SREGS.match(s) for s in self.sources)

    @property
    def uniform_result(self) -> bool:
        """A barrier reduction's result is the CTA's."""
        return _is_barrier_reduction(self.opcode)


def _split_first_operand(operands: str) -> Tuple[str, str]:
    depth = 0
    for i, c in enumerate(operands):
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        elif c == "," and depth == 0:
            return operands[:i], operands[i + 1:]
    return operands, ""


class Block:
    def __init__(self, name: str):
        self.name = name
        self.statements: List[Statement] = []
        self.successors: List[str] = []
        self.branch: Optional[Statement] = None  # the conditional one ending it


def _functions(ptx: str) -> List[Tuple[str, List[Tuple[int, str]]]]:
    """[(name, [(line number, statement)])] of each .entry / .func body."""
    out = []
    lines = ptx.split("\n")
    i = 0
    header = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(entry|func)\b.*?(\w+)\s*\(")
    while i < len(lines):
        m = header.match(lines[i])
        if not m:
            i += 1
            continue
        name = m.group(2)
        # The body: from the first line that is "{" to its matching "}".
        while i < len(lines) and lines[i].strip() != "{" and \
                not lines[i].split("//")[0].rstrip().endswith(";"):
            i += 1
        if i >= len(lines) or lines[i].strip() != "{":
            i += 1
            continue  # a declaration without a body
        # Statements end at ";" (a .branchtargets list spans lines); labels
        # and inline asm's braces stand on lines of their own.
        depth, body, pending, first = 0, [], "", None
        while i < len(lines):
            stripped = lines[i].split("//")[0].strip()
            if not pending and stripped in ("{", "}"):
                depth += 1 if stripped == "{" else -1
                if depth == 0:
                    break
                if depth > 1 or stripped == "}":
                    body.append((i + 1, stripped))
            elif not pending and _LABEL.match(stripped) and ";" not in stripped and \
                    ".branchtargets" not in stripped:
                body.append((i + 1, stripped))
            elif stripped:
                first = first or i + 1
                pending += " " + stripped
                while ";" in pending:
                    statement, pending = pending.split(";", 1)
                    if statement.strip():
                        body.append((first, statement.strip()))
                    first = i + 1 if pending.strip() else None
            i += 1
        out.append((name, body))
        i += 1
    return out


def _blocks(body: List[Tuple[int, str]]) -> List[Block]:
    """The function's basic blocks in order (a brx's successors from its
    .branchtargets table).
    Inline-asm scopes ({ ... }) are straight-line code: their labels and
    branches stay inside them."""
    blocks = [Block("<entry>")]
    tables: Dict[str, List[str]] = {}
    depth = 0
    for line, text in body:
        if text == "{":
            depth += 1
            continue
        if text == "}":
            depth -= 1
            continue
        m = _LABEL.match(text)
        if m:
            label, rest = m.group(1), m.group(2).strip()
            if rest.startswith(".branchtargets"):
                tables[label] = [t.strip() for t in rest[len(".branchtargets"):].split(",")
                                 if t.strip()]
                continue
            if depth:
                continue
            if blocks[-1].statements or blocks[-1].name != "<entry>":
                prev = blocks[-1]
                if not prev.successors and not _ends(prev):
                    prev.successors.append(label)
                blocks.append(Block(label))
            else:
                blocks[-1].name = label
            if rest:
                text = rest
            else:
                continue
        if text.startswith("."):  # .reg / .local / .shared declarations
            continue
        st = Statement(text, line)
        if depth:
            # Inline asm's local control flow: keep its data flow only.
            if not st.opcode.startswith(("bra", "brx")):
                blocks[-1].statements.append(st)
            continue
        blocks[-1].statements.append(st)
        op = st.opcode
        if op.startswith(("bra", "brx", "ret", "exit", "trap")):
            if op.startswith("bra"):
                blocks[-1].successors.append(st.operands.strip())
            if st.guard is not None or op.startswith("brx"):
                blocks[-1].branch = st
            if st.guard is None:
                blocks.append(Block(f"<after {line}>"))
            else:
                # A guarded branch falls through: the next block.
                nxt = Block(f"<after {line}>")
                blocks[-1].successors.append(nxt.name)
                blocks.append(nxt)
    # A brx's successors are its table's targets, wherever it is declared.
    for b in blocks:
        if b.branch is not None and b.branch.opcode.startswith("brx"):
            b.successors += tables.get(b.branch.operands.split(",")[-1].strip(), [])
    return [b for b in blocks if b.statements or b.successors]


def _ends(block: Block) -> bool:
    return bool(block.statements) and block.statements[-1].guard is None and \
        block.statements[-1].opcode.startswith(("bra", "brx", "ret", "exit", "trap"))


def _post_dominators(blocks: List[Block]) -> Dict[str, int]:
    """{block: bitset of the blocks post-dominating it, itself included}."""
    index = {b.name: i for i, b in enumerate(blocks)}
    full = (1 << len(blocks)) - 1
    pdom = {b.name: full for b in blocks}
    exits = [b for b in blocks if not [s for s in b.successors if s in index]]
    for b in exits:
        pdom[b.name] = 1 << index[b.name]
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            succs = [s for s in b.successors if s in index]
            if not succs:
                continue
            meet = full
            for s in succs:
                meet &= pdom[s]
            new = meet | (1 << index[b.name])
            if new != pdom[b.name]:
                pdom[b.name] = new
                changed = True
    return pdom


def misplaced_barriers(ptx: str) -> List[str]:
    """'function:line: statement (under the per-thread branch at line L)'
    for each aligned CTA barrier of `ptx` that not every thread of the CTA
    reaches together; [] when there is none."""
    from ._mlir_libs import _site_initialize_0 as extension
    found = []
    for name, body in _functions(ptx):
        blocks = _blocks(body)
        index = {b.name: i for i, b in enumerate(blocks)}
        pdom = _post_dominators(blocks)
        divergent: Set[str] = set()
        under: Dict[str, Statement] = {}  # block -> the divergent branch it depends on
        changed = True
        while changed:
            changed = False
            for b in blocks:
                region = b.name in under
                for st in b.statements:
                    if st.uniform_result:
                        continue
                    if region or st.per_thread or any(s in divergent for s in st.sources) or \
                            (st.guard is not None and st.guard[1] in divergent):
                        new = [d for d in st.dests if d not in divergent]
                        if new:
                            divergent.update(new)
                            changed = True
            for b in blocks:
                br = b.branch
                if br is None:
                    continue
                if br.opcode.startswith("brx"):
                    per_thread = any(s in divergent for s in br.sources)
                else:
                    per_thread = br.guard[1] in divergent
                if not per_thread:
                    continue
                strict = pdom[b.name] & ~(1 << index[b.name])
                for s in b.successors:
                    if s not in index:
                        continue
                    dependent = pdom[s] & ~strict
                    for i, other in enumerate(blocks):
                        if dependent >> i & 1 and other.name not in under:
                            under[other.name] = br
                            changed = True
        for b in blocks:
            for st in b.statements:
                # A barrier with a thread count (bar.sync 1, 256) is a named
                # barrier of the warps that take part (warp specialisation):
                # a part of the CTA is what runs it.
                if not extension.count_aligned_barriers(st.text + ";") or \
                        len(_split_first_operand(st.operands)[1].strip()) and \
                        st.opcode.split(".")[-1] in ("sync", "arrive", "aligned"):
                    continue
                if b.name in under:
                    found.append(f"{name}:{st.line}: {st.text} (under the per-thread branch "
                                 f"at line {under[b.name].line}: {under[b.name].text})")
                elif st.guard is not None and st.guard[1] in divergent:
                    found.append(f"{name}:{st.line}: {st.text} (its guard is per-thread)")
    return found

