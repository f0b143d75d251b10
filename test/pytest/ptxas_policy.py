"""ptxas is part of every test machine here (CI included): tests that assemble
kernels require it instead of silently dropping their checks. Setting
TILEMEGA_NO_PTXAS=1 is the one explicit way to run without it (the same
switch as test/lit.cfg.py)."""

import os

import pytest

from tilemega.compiler import find_ptxas

OPT_OUT = "TILEMEGA_NO_PTXAS"


def ptxas_checks_enabled() -> bool:
    """True when ptxas is installed; False only under TILEMEGA_NO_PTXAS=1;
    otherwise the calling test fails, naming what is missing."""
    if find_ptxas():
        return True
    if os.environ.get(OPT_OUT) == "1":
        return False
    pytest.fail("ptxas was not found on PATH or in /usr/local/cuda/bin; these tests "
                "assemble every kernel with it. Install the CUDA toolkit, or set "
                f"{OPT_OUT}=1 to run without the ptxas checks.")
