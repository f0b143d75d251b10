"""Checks of an artifact's PTX text before it reaches the driver.

The PTX is untrusted input like the JSON: a truncated file, a PTX of another
artifact or one whose kernels were compiled for another block size would
otherwise show up as a JIT error at best and as a kernel that indexes threads
it does not have at worst. `check_ptx` raises ValueError naming the file and
what is wrong; it is a plausibility check of the structure (header, every
kernel's `.entry`, balanced braces, `.reqntid`/`.maxntid` against the
metadata's block), not a PTX parser.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

_COMMENTS = re.compile(rb"//[^\n]*|/\*.*?\*/", re.S)
_ENTRY = re.compile(rb"\.entry\s+([A-Za-z_$%][\w$%]*)\s*\(")
_THREADS = re.compile(rb"\.(reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def entry_directives(text: bytes) -> Dict[str, Dict[str, Tuple[int, int, int]]]:
    """kernel name -> {"reqntid" | "maxntid": (x, y, z)} for every `.entry`."""
    out: Dict[str, Dict[str, Tuple[int, int, int]]] = {}
    for match in _ENTRY.finditer(text):
        close = text.find(b")", match.end())
        body = text.find(b"{", close) if close >= 0 else -1
        directives = {}
        if body >= 0:
            for d in _THREADS.finditer(text, close, body):
                dims = tuple(int(v) if v else 1 for v in d.group(2, 3, 4))
                directives[d.group(1).decode()] = dims
        out[match.group(1).decode()] = directives
    return out


def check_ptx(ptx: bytes, spec, where: str) -> None:
    """Raise ValueError (prefixed with `where`) unless `ptx` plausibly holds
    every kernel of `spec` (an ArtifactSpec) for its block size."""
    problem = _problem(ptx, spec)
    if problem is not None:
        raise ValueError(f"{where}: {problem}")


def _problem(ptx: bytes, spec) -> Optional[str]:
    if not ptx.strip(b"\0 \t\r\n"):
        return "the PTX file is empty"
    try:
        ptx.rstrip(b"\0").decode("ascii")
    except UnicodeDecodeError as exc:
        return f"not PTX text (a non-ASCII byte at offset {exc.start})"
    text = _COMMENTS.sub(b"", ptx)
    for directive in (b".version", b".target"):
        if directive not in text:
            return f"no {directive.decode()} directive: not PTX, or truncated"
    opened, closed = text.count(b"{"), text.count(b"}")
    if opened != closed:
        return (f"{opened} '{{' but {closed} '}}': the file is truncated "
                f"({len(ptx)} bytes)")
    entries = entry_directives(text)
    for i, kernel in enumerate(spec.kernels):
        directives = entries.get(kernel.name)
        if directives is None:
            return (f"no '.entry {kernel.name}' for kernels[{i}]; the PTX defines "
                    f"{sorted(entries) or 'no kernel'}")
        block = tuple(kernel.block)
        req = directives.get("reqntid")
        if req is not None and req != block:
            return (f"kernel {kernel.name!r} is compiled for exactly {list(req)} threads "
                    f"(.reqntid) but kernels[{i}].block is {list(block)}")
        most = directives.get("maxntid")
        if most is not None and any(b > m for b, m in zip(block, most)):
            return (f"kernel {kernel.name!r} is compiled for at most {list(most)} threads "
                    f"(.maxntid) but kernels[{i}].block is {list(block)}")
    return None
