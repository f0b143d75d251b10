"""Writes the PTX held by the gpu.binary ops of an MLIR module to a file.

Usage: extract_ptx.py INPUT.mlir OUTPUT.ptx

gpu-module-to-binary{format=isa} stores PTX as an escaped string attribute;
this undoes MLIR's string escaping (\\XX hex escapes, \\\\ and \\") so that
ptxas can assemble the text. Lit tests use it; it needs no MLIR.
"""

import re
import sys


def unescape(text: str) -> str:
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "\\\"":
                out += nxt.encode()
                i += 2
                continue
            if i + 2 < len(text) and re.fullmatch(r"[0-9A-Fa-f]{2}",
                                                  text[i + 1:i + 3]):
                out.append(int(text[i + 1:i + 3], 16))
                i += 3
                continue
        out += c.encode()
        i += 1
    return out.decode()


def main() -> int:
    source = open(sys.argv[1]).read()
    objects = re.findall(
        r'#gpu\.object<#nvvm\.target<[^>]*>'
        r'(?:,\s*properties\s*=\s*\{[^}]*\})?'
        r',\s*(?:assembly\s*=\s*)?"((?:[^"\\]|\\.)*)"', source)
    if not objects:
        print("extract_ptx.py: no #gpu.object with PTX in the input",
              file=sys.stderr)
        return 1
    with open(sys.argv[2], "w") as f:
        for ptx in objects:
            f.write(unescape(ptx))
    return 0


if __name__ == "__main__":
    sys.exit(main())
