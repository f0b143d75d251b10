# -*- Python -*-
# lit configuration of the TileMega regression tests.

import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "TILEMEGA"
# lit from PyPI cannot run the external shell: use lit's own.
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["CMakeLists.txt", "README.txt", "LICENSE.txt", "lit.cfg.py",
                   "lit.site.cfg.py", "Inputs", "Utils", "pytest"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tilemega_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(
    ("%extract-ptx", f"{config.python_executable} "
     f"{os.path.join(config.tilemega_src_root, 'test', 'Utils', 'extract_ptx.py')}"))
config.substitutions.append(
    ("%check-mega-tables", f"{config.python_executable} "
     f"{os.path.join(config.tilemega_src_root, 'test', 'Utils', 'check_mega_tables.py')}"))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.tilemega_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["tilemega-opt"], tool_dirs)

# ptxas: PTX tests assemble what we emit. ptxas is on every machine here (CI
# included), so its absence is an error, not a reason to drop checks;
# TILEMEGA_NO_PTXAS=1 is the explicit opt-out, under which the tests that
# assemble (`REQUIRES: ptxas`) are reported UNSUPPORTED.
ptxas = shutil.which("ptxas") or (
    "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas")
    else None)
if not ptxas:
    if os.environ.get("TILEMEGA_NO_PTXAS") != "1":
        lit_config.fatal(
            "ptxas was not found on PATH or in /usr/local/cuda/bin; the PTX "
            "tests assemble every kernel with it. Install the CUDA toolkit, or "
            "set TILEMEGA_NO_PTXAS=1 to run without the tests that need it.")
    lit_config.warning("TILEMEGA_NO_PTXAS=1: the tests that assemble PTX with "
                       "ptxas are UNSUPPORTED in this run")
else:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
    # gpu-module-to-binary{format=bin} looks for ptxas on PATH.
    llvm_config.with_environment("PATH", os.path.dirname(ptxas),
                                 append_path=True)

if config.enable_python:
    config.available_features.add("python")
    llvm_config.with_environment(
        "PYTHONPATH",
        os.path.join(config.tilemega_obj_root, "python_packages"),
        append_path=True)
