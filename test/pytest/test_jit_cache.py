"""@tilemega.jit: specialisation per shape, the artifact cache, launching."""

import hashlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip(
    "tilemega.ir", reason="the compiler package is not built "
    "(run scripts/tilemega.sh build and put build/python_packages on PYTHONPATH)")

import tilemega  # noqa: E402
import tilemega.language as T  # noqa: E402
from tilemega import cache, compiler  # noqa: E402
from tilemega.runtime import ArgumentError, RuntimeUnavailable  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, EXAMPLES)

# A CacheWarning that a test does not expect is a failure.
pytestmark = pytest.mark.filterwarnings("error::tilemega.cache.CacheWarning")

M, N = T.symbolic("M"), T.symbolic("N")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("TILEMEGA_CACHE_DIR", str(path))
    cache.clear_memory()
    cache.stats.clear()
    return path


def make_add(**jit_options):
    @tilemega.jit(**jit_options)
    def add_one(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), *,
                block_M: int = 64):
        with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, 128), threads=128) as (bx, by):
            f = T.alloc_fragment((block_M, 128), "float32")
            T.copy(A[bx * block_M, by * 128], f)
            for i, j in T.Parallel(block_M, 128):
                f[i, j] = f[i, j] + 1.0
            T.copy(f, B[bx * block_M, by * 128])
    return add_one


class FakeArray:
    """Anything with a shape binds symbols (the runtime checks the rest)."""

    def __init__(self, *shape):
        self.shape = shape


def _failing_compile(*args, **kwargs):
    raise AssertionError("the MLIR pipeline ran, but the artifact should come from the cache")


def test_specialises_per_shape():
    add = make_add()
    a = add.compile(M=256, N=1024)
    b = add.compile(M=100, N=256, block_M=32)
    ka, kb = a.kernels[0], b.kernels[0]
    assert ka["params"][0]["shape"] == [256, 1024] and ka["grid"] == [4, 8, 1]
    assert kb["params"][0]["shape"] == [100, 256] and kb["grid"] == [4, 2, 1]
    assert "memref<100x256xf32>" in add.ir(M=100, N=256)
    assert add.compile(M=256, N=1024) is a                     # memoised
    assert cache.stats["miss"] == 2


def test_bind_shapes_from_tensors():
    add = make_add()
    assert add.bind_shapes([FakeArray(256, 512), FakeArray(256, 512)]) == {"M": 256, "N": 512}
    with pytest.raises(ArgumentError, match=r"argument B: dimension 1 is 64 but symbol N is "
                                            r"512 from A.shape\[1\]"):
        add.bind_shapes([FakeArray(256, 512), FakeArray(256, 64)])
    with pytest.raises(ArgumentError, match=r"argument A: expected a 2-d tensor"):
        add.bind_shapes([FakeArray(256), FakeArray(256, 64)])
    with pytest.raises(ArgumentError, match=r"expected 2 argument\(s\) \(A, B\), got 1"):
        add.bind_shapes([FakeArray(256, 512)])
    with pytest.raises(ArgumentError, match=r"argument A: expected a tensor"):
        add.bind_shapes([3, FakeArray(256, 512)])

    out = make_add(out_idx=[-1])
    assert out.bind_shapes([FakeArray(8, 128)]) == {"M": 8, "N": 128}
    with pytest.raises(ArgumentError, match=r"the output\(s\) \['B'\] are allocated"):
        out.bind_shapes([FakeArray(8, 128), FakeArray(8, 128)])


def test_symbol_expressions_in_shapes_are_checked():
    @tilemega.jit
    def pairs(A: T.Tensor((M, 2 * N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32):
            pass
    assert pairs.bind_shapes([FakeArray(4, 16), FakeArray(4, 8)]) == {"M": 4, "N": 8}
    with pytest.raises(ArgumentError, match=r"dimension 1 is 10, but 2 \* N = 16"):
        pairs.bind_shapes([FakeArray(4, 10), FakeArray(4, 8)])


def test_disk_cache_serves_a_new_jit_function_without_the_pipeline(cache_dir, monkeypatch):
    entry = make_add().compile_entry(M=256, N=1024)
    assert entry.source == "compiled" and entry.path.startswith(str(cache_dir))
    files = sorted(os.listdir(os.path.dirname(entry.path)))
    assert {"add_one.json", "add_one.ptx", "key.json"} <= set(files)
    info = json.load(open(os.path.join(os.path.dirname(entry.path), "key.json")))
    assert set(info["components"]) >= {"ir", "options", "tilemega", "mlir", "ptxas"}
    assert info["components"]["ir"] == make_add().ir(M=256, N=1024)

    cache.clear_memory()
    monkeypatch.setattr(compiler, "compile", _failing_compile)
    again = make_add().compile_entry(M=256, N=1024)
    assert again.source == "disk"
    assert again.compiled.ptx == entry.compiled.ptx
    assert again.compiled.cubin == entry.compiled.cubin
    assert again.compiled.kernels == entry.compiled.kernels
    # Within the process, the memo answers.
    third = make_add().compile_entry(M=256, N=1024)
    assert third.source == "memory"
    # The runtime loads the cached folder directly.
    from tilemega.runtime import load_artifact
    assert list(load_artifact(again.path).kernels) == ["add_one"]


def test_key_depends_on_ir_and_options_but_not_on_source_positions(monkeypatch):
    base = make_add().compile_entry(M=64, N=128)
    assert make_add(opt_level=2).compile_entry(M=64, N=128).key != base.key
    assert make_add().compile_entry(M=64, N=256).key != base.key
    # The same kernel defined elsewhere (other lines, other file name) has the
    # same IR text without locations: same key, no compile.
    source = textwrap.dedent('''
        import tilemega, tilemega.language as T
        M, N = T.symbolic("M"), T.symbolic("N")


        @tilemega.jit
        def add_one(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), *,
                    block_M: int = 64):
            with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, 128), threads=128) as (bx, by):
                f = T.alloc_fragment((block_M, 128), "float32")
                T.copy(A[bx * block_M, by * 128], f)
                for i, j in T.Parallel(block_M, 128):
                    f[i, j] = f[i, j] + 1.0
                T.copy(f, B[bx * block_M, by * 128])
    ''')
    scope = {}
    exec(compile(source, "/elsewhere/other_file.py", "exec"), scope)
    cache.clear_memory()
    monkeypatch.setattr(compiler, "compile", _failing_compile)
    moved = scope["add_one"].compile_entry(M=64, N=128)
    assert moved.key == base.key and moved.source == "disk"


def test_components_of_the_key():
    parts = cache.key_components("module {}", chip="sm_90a", opt_level=3, features="+ptx80",
                                 assemble=True)
    assert parts["tilemega"] == tilemega.__version__ and parts["mlir"] == compiler.MLIR_VERSION
    ptxas = compiler.find_ptxas()
    if ptxas:
        out = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
        assert parts["ptxas"] == out.strip().splitlines()[-1]
    else:
        assert parts["ptxas"] == "none"
    assert cache.make_key(parts) != cache.make_key(dict(parts, ptxas="other"))


def _sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_entry_carries_the_hash_of_every_file():
    assert compiler.find_ptxas(), "ptxas is on every machine here: the entry must hold a cubin"
    entry = make_add().compile_entry(M=32, N=128, block_M=32)
    folder = os.path.dirname(entry.path)
    content = json.load(open(os.path.join(folder, "content.json")))
    assert set(content["sha256"]) == {"key.json", "add_one.json", "add_one.ptx", "add_one.cubin"}
    for name, digest in content["sha256"].items():
        assert _sha256_of(os.path.join(folder, name)) == digest, name
    assert set(os.listdir(folder)) == set(content["sha256"]) | {"content.json"}
    assert entry.content == content["sha256"]


def _flip_byte(path, offset=100):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def _truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)


def _edit_hash(path):
    content = json.load(open(path))
    digest = content["sha256"]["add_one.ptx"]
    content["sha256"]["add_one.ptx"] = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    json.dump(content, open(path, "w"))


def _truncate_and_rehash(path):
    """Damage that content.json agrees with: the JSON parser must catch it."""
    _truncate(path)
    manifest = os.path.join(os.path.dirname(path), "content.json")
    content = json.load(open(manifest))
    content["sha256"][os.path.basename(path)] = _sha256_of(path)
    json.dump(content, open(manifest, "w"))


def _escape_the_folder(path):
    content = json.load(open(path))
    content["sha256"]["../add_one.ptx"] = content["sha256"].pop("add_one.ptx")
    json.dump(content, open(path, "w"))


# (file damaged, how, what the warning says)
DAMAGE = [
    ("add_one.ptx", _flip_byte, r"add_one\.ptx: SHA-256 is [0-9a-f]{64}, content\.json says"),
    ("add_one.ptx", os.remove, r"add_one\.ptx is missing"),
    ("add_one.json", _truncate, r"add_one\.json: SHA-256 is"),
    ("key.json", _truncate, r"key\.json: SHA-256 is"),
    ("add_one.json", _truncate_and_rehash, r"add_one\.json is not valid JSON"),
    ("add_one.cubin", os.remove, r"add_one\.cubin is missing"),
    ("add_one.cubin", _flip_byte, r"add_one\.cubin: SHA-256 is"),
    ("content.json", _edit_hash, r"add_one\.ptx: SHA-256 is [0-9a-f]{64}, content\.json says"),
    ("content.json", _truncate, r"content\.json is unreadable"),
    ("content.json", os.remove, r"content\.json is missing \(no content hash\)"),
    ("content.json", _escape_the_folder, r"content\.json: bad entry '\.\./add_one\.ptx'"),
]


@pytest.mark.parametrize("victim,damage,problem", DAMAGE,
                         ids=[f"{v}-{d.__name__.strip('_')}" for v, d, _ in DAMAGE])
def test_damaged_entry_is_recompiled_with_a_warning_never_loaded(victim, damage, problem):
    assert compiler.find_ptxas(), "ptxas is on every machine here: the entry must hold a cubin"
    fresh = make_add().compile_entry(M=32, N=128, block_M=32)
    folder = os.path.dirname(fresh.path)
    damage(os.path.join(folder, victim))
    cache.clear_memory()

    with pytest.warns(cache.CacheWarning) as caught:
        again = make_add().compile_entry(M=32, N=128, block_M=32)
    (warning,) = caught
    message = str(warning.message)
    assert message.startswith(f"tilemega cache: corrupt entry {folder}: ")
    assert message.endswith("; recompiling and replacing it")
    assert __import__("re").search(problem, message), message
    assert again.source == "compiled" and cache.stats["corrupt"] == 1
    assert again.compiled.ptx == fresh.compiled.ptx
    assert again.compiled.cubin == fresh.compiled.cubin

    # The entry was replaced by a whole, checked one: a new process hits it.
    assert again.path == fresh.path
    with open(again.path.replace(".json", ".ptx")) as f:
        assert f.read() == fresh.compiled.ptx
    assert not [n for n in os.listdir(os.path.dirname(folder)) if n != os.path.basename(folder)]
    cache.clear_memory()
    third = make_add().compile_entry(M=32, N=128, block_M=32)
    assert third.source == "disk" and third.compiled.ptx == fresh.compiled.ptx


def test_damage_after_the_memo_is_caught_before_the_runtime_reads_it(monkeypatch):
    add = make_add()
    entry = add.compile_entry(M=32, N=128, block_M=32)
    ptx_path = entry.path.replace(".json", ".ptx")
    _flip_byte(ptx_path)
    # The process memo answers without reading the disk ...
    assert make_add().compile_entry(M=32, N=128, block_M=32).source == "memory"
    # ... but the files are checked again before the runtime gets the path:
    # the entry is rewritten from the verified module in memory, no compile.
    monkeypatch.setattr(compiler, "compile", _failing_compile)
    with pytest.warns(cache.CacheWarning, match=r"add_one\.ptx: SHA-256 is .*rewriting it from "
                                                r"the verified copy in memory"):
        art = add.get_kernel({"M": 32, "N": 128}, {"block_M": 32})
    with open(art.ptx_path) as f:
        assert f.read() == entry.compiled.ptx
    assert cache.verified_path(entry) == art.path          # checked clean now: no warning
    cache.clear_memory()
    assert make_add().compile_entry(M=32, N=128, block_M=32).source == "disk"


def test_an_entry_replaced_by_another_process_is_not_damage():
    entry = make_add().compile_entry(M=32, N=128, block_M=32)
    # Another process's whole entry for the same key (here: another
    # creation time, so other key.json bytes, and its own hashes).
    folder = os.path.dirname(entry.path)
    info = json.load(open(os.path.join(folder, "key.json")))
    info["created"] += 1
    json.dump(info, open(os.path.join(folder, "key.json"), "w"))
    content = json.load(open(os.path.join(folder, "content.json")))
    content["sha256"]["key.json"] = _sha256_of(os.path.join(folder, "key.json"))
    json.dump(content, open(os.path.join(folder, "content.json"), "w"))
    assert cache.verified_path(entry) == entry.path        # no warning (they are errors here)
    assert entry.content == content["sha256"]
    cache.clear_memory()
    assert make_add().compile_entry(M=32, N=128, block_M=32).source == "disk"


def test_compile_errors_are_not_cached():
    @tilemega.jit
    def tiny(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64,), "float32")
            T.copy(A, f)
            T.copy(f, A)
    try:
        tiny.compile()
    except tilemega.CompileError:
        assert cache.stats["miss"] == 0
        assert not os.path.isdir(os.path.join(cache.cache_dir(), "artifacts"))
    else:
        pytest.fail("a 64-element fragment over 128 threads must not compile")


def test_cache_can_be_disabled(cache_dir):
    entry = make_add(cache=False).compile_entry(M=64, N=128)
    assert entry.path is None and not cache_dir.exists()


def test_call_compiles_then_the_runtime_checks_the_arguments():
    np = pytest.importorskip("numpy")
    add = make_add()
    a = np.zeros((64, 128), np.float32)
    # numpy arrays are not CUDA tensors: the runtime refuses them (or finds
    # no GPU) -- after the kernel for their shape was compiled.
    with pytest.raises((ArgumentError, RuntimeUnavailable)):
        add(a, a)
    assert add.last_entry is not None
    assert add.last_entry.compiled.kernels[0]["params"][0]["shape"] == [64, 128]
    with pytest.raises(TypeError, match="unexpected keyword argument 'M'"):
        add(a, a, M=64)


def test_out_idx_must_name_tensors():
    with pytest.raises(TypeError, match="out_idx 1 names scalar parameter alpha"):
        @tilemega.jit(out_idx=1)
        def k(A: T.Tensor((4,), "float32"), alpha: T.float32):
            pass


_CHILD = textwrap.dedent('''
    import json, sys, time
    t0 = time.perf_counter()
    sys.path.insert(0, {examples!r})
    import tilemega, tilemega.compiler
    from tilemega import cache
    if {forbid_pipeline}:
        def forbidden(*a, **k):
            raise SystemExit("tilemega.compiler.compile was called on a cache hit")
        tilemega.compiler.compile = forbidden
    import scale_add_lang
    from tilemega.ir import Context
    with Context():              # load the native MLIR library before timing
        pass
    t1 = time.perf_counter()
    scale_add_lang.scale_add.trace()
    t2 = time.perf_counter()
    entry = scale_add_lang.scale_add.compile_entry()
    t3 = time.perf_counter()
    print(json.dumps({{"source": entry.source, "startup_s": t1 - t0, "trace_s": t2 - t1,
                      "compile_s": t3 - t2, "pipeline_s": entry.compile_seconds,
                      "stats": dict(cache.stats),
                      "pipeline_loaded": "tilemega.passmanager" in sys.modules}}))
''')


def _child(forbid_pipeline, env):
    code = _CHILD.format(examples=EXAMPLES, forbid_pipeline=forbid_pipeline)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_fresh_process_cache_hit_skips_the_pipeline(cache_dir):
    env = dict(os.environ, TILEMEGA_CACHE_DIR=str(cache_dir))
    cold = _child(False, env)
    warm = _child(True, env)          # tilemega.compiler.compile replaced by an error
    assert cold["source"] == "compiled" and cold["stats"] == {"miss": 1}
    assert warm["source"] == "disk" and warm["stats"] == {"disk_hit": 1}
    assert not warm["pipeline_loaded"]         # the pass manager was never imported
    ms = lambda s: f"{s * 1e3:7.1f} ms"  # noqa: E731
    print(f"\nscale_add via tilemega.jit in fresh processes (cache {cache_dir}):\n"
          f"  startup (imports, MLIR load): cold {ms(cold['startup_s'])}, hit {ms(warm['startup_s'])}\n"
          f"  trace:                        cold {ms(cold['trace_s'])}, hit {ms(warm['trace_s'])}\n"
          f"  compile() after the trace:    cold {ms(cold['compile_s'])} (pipeline + ptxas "
          f"{ms(cold['pipeline_s']).strip()}), hit {ms(warm['compile_s'])} (key + disk load)")
    assert warm["compile_s"] < cold["compile_s"]


# ---------------------------------------------------------------------------
# On a GPU
# ---------------------------------------------------------------------------

def _gpu_reason():
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    try:
        import cuda.bindings.driver as _driver
        del _driver
    except ImportError:
        return "cuda-python is not installed"
    return None


@pytest.mark.gpu
@pytest.mark.skipif(_gpu_reason() is not None, reason=f"needs a CUDA GPU: {_gpu_reason()}")
def test_gpu_scale_add_lang_matches_torch():
    import torch
    import scale_add_lang

    a = torch.randn(256, 1024, device="cuda")
    b = torch.empty_like(a)
    scale_add_lang.scale_add(a, b, 0.75)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, scale_add_lang.reference(a, 0.75))


@pytest.mark.gpu
@pytest.mark.skipif(_gpu_reason() is not None, reason=f"needs a CUDA GPU: {_gpu_reason()}")
def test_gpu_out_idx_and_shapes():
    import torch

    add = make_add(out_idx=[-1])
    for shape in ((256, 512), (100, 384)):
        a = torch.randn(*shape, device="cuda")
        b = add(a)
        torch.cuda.synchronize()
        assert b.shape == a.shape
        torch.testing.assert_close(b, a + 1)
    assert len(add._artifacts) == 2
