"""tilemega.autotune: config search, progress, the on-disk record, errors."""

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
import tilemega.autotune as autotune_mod  # noqa: E402
import tilemega.language as T  # noqa: E402
from tilemega import cache  # noqa: E402
from tilemega.runtime import RuntimeUnavailable  # noqa: E402

# A CacheWarning that a test does not expect is a failure.
pytestmark = pytest.mark.filterwarnings("error::tilemega.cache.CacheWarning")

M, N = T.symbolic("M"), T.symbolic("N")

CONFIGS = [
    {"block_M": 64, "threads": 128},
    {"block_M": 32, "threads": 128},
    {"block_M": 64, "threads": 96},     # 96 threads cannot hold the layout: diagnostic
    {"block_M": 128, "threads": 100},   # rejected while tracing (threads not a multiple of 32)
]
FAKE_MS = {64: 0.30, 32: 0.12, 128: 0.05}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("TILEMEGA_CACHE_DIR", str(path))
    cache.clear_memory()
    cache.stats.clear()
    return path


def make_tuned(**options):
    @tilemega.autotune(configs=CONFIGS, key=["M", "N"], **options)
    @tilemega.jit(out_idx=[-1])
    def add_one(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), *,
                block_M: int, threads: int):
        with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, 128), threads=threads) as (bx, by):
            f = T.alloc_fragment((block_M, 128), "float32")
            T.copy(A[bx * block_M, by * 128], f)
            for i, j in T.Parallel(block_M, 128):
                f[i, j] = f[i, j] + 1.0
            T.copy(f, B[bx * block_M, by * 128])
    return add_one


class FakeArray:
    def __init__(self, *shape):
        self.shape = shape


@pytest.fixture
def fake_gpu(monkeypatch):
    """Pretend a GPU is there: fixed device name, timings from FAKE_MS."""
    timed = []

    def time_config(self, config, kernel, full_args, reset):
        timed.append(config)
        return [FAKE_MS[config["block_M"]]] * self.rep

    monkeypatch.setattr(autotune_mod.Autotuner, "_require_gpu", lambda self: None)
    monkeypatch.setattr(autotune_mod.Autotuner, "_device_name", lambda self, args: "FakeGPU")
    monkeypatch.setattr(autotune_mod.Autotuner, "_time_config", time_config)
    monkeypatch.setattr(tilemega.jit.JitFunction, "_with_outputs",
                        lambda self, args, bindings: (list(args) + [FakeArray(*args[0].shape)],
                                                      []))
    return timed


def test_without_a_gpu_the_autotuner_says_so(monkeypatch):
    monkeypatch.setattr(autotune_mod, "_gpu_unavailable_reason", lambda: "torch is not installed")
    tuned = make_tuned()
    with pytest.raises(RuntimeUnavailable) as info:
        tuned(FakeArray(256, 512))
    message = str(info.value)
    assert "times its configurations on a CUDA GPU, but torch is not installed" in message
    assert "add_one.compile(config={'block_M': 64, 'threads': 128}" in message
    # Compile-only use works without a GPU.
    result = tuned.compile(config={"block_M": 32, "threads": 128}, M=256, N=512)
    assert result.kernels[0]["grid"] == [8, 4, 1]


def test_tunes_skips_broken_configs_and_remembers(fake_gpu, capsys, cache_dir, monkeypatch):
    tuned = make_tuned(rep=5)
    best = tuned.best_config(FakeArray(256, 512))
    assert best == {"block_M": 32, "threads": 128}
    assert [c["block_M"] for c in fake_gpu] == [64, 32]     # broken configs never timed

    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "tuning 4 configs for M=256, N=512 on FakeGPU" in lines[0]
    assert any(l.startswith("[1/4] [#####---------------] block_M=64, threads=128 ... 0.300 ms")
               for l in lines), err
    assert any(l.startswith("[2/4]") and l.endswith("0.120 ms") for l in lines), err
    assert any(l.startswith("[3/4]") and "skipped: does not compile" in l for l in lines), err
    assert any(l.startswith("[4/4]") and "skipped" in l and "threads" in l for l in lines), err
    assert "best: block_M=32, threads=128 (0.120 ms)" in err

    # The record on disk, per (key, device).
    path = tuned.results_path()
    assert path.startswith(str(cache_dir / "autotune"))
    record = json.load(open(path))
    (key, result), = record["results"].items()
    assert json.loads(key) == {"key": {"M": 256, "N": 512}, "device": "FakeGPU"}
    assert result["config"] == best and result["ms"] == pytest.approx(0.12)
    assert len(result["skipped"]) == 2 and len(result["timings"]) == 2

    # Same key again: no tuning. A new process (here: a new Autotuner and a
    # fresh memo) reads the record, compiles nothing and times nothing.
    assert tuned.best_config(FakeArray(256, 512)) == best
    assert len(fake_gpu) == 2
    cache.clear_memory()
    monkeypatch.setattr(tilemega.compiler, "compile",
                        lambda *a, **k: pytest.fail("compiled on a tuning-record hit"))
    again = make_tuned(rep=5)
    assert again.best_config(FakeArray(256, 512)) == best
    assert len(fake_gpu) == 2
    assert capsys.readouterr().err == ""


def test_new_key_tunes_again(fake_gpu):
    tuned = make_tuned(verbose=False)
    tuned.best_config(FakeArray(256, 512))
    tuned.best_config(FakeArray(128, 512))
    assert len(fake_gpu) == 4
    record = json.load(open(tuned.results_path()))
    assert len(record["results"]) == 2


@pytest.mark.parametrize("damage,problem", [
    (lambda text: text[:len(text) // 2], r"unreadable: "),
    (lambda text: "[]", r"no 'results' object"),
    (lambda text: json.dumps({"results": {"k": 3}}), r"results without a config: \['k'\]"),
], ids=["truncated", "not-an-object", "bad-result"])
def test_corrupt_record_warns_and_is_rebuilt(fake_gpu, damage, problem):
    tuned = make_tuned(verbose=False)
    best = tuned.best_config(FakeArray(256, 512))
    path = tuned.results_path()
    text = open(path).read()
    with open(path, "w") as f:
        f.write(damage(text))

    again = make_tuned(verbose=False)
    with pytest.warns(tilemega.cache.CacheWarning,
                      match=rf"tilemega.autotune add_one: the tuning record {path} is corrupt "
                            rf"\({problem}.*\); it is rebuilt as keys are tuned"):
        assert again.best_config(FakeArray(256, 512)) == best
    assert len(fake_gpu) == 4                       # tuned again, nothing loaded from it
    record = json.load(open(path))                  # rewritten whole
    assert list(record["results"]) == [json.dumps({"key": {"M": 256, "N": 512},
                                                   "device": "FakeGPU"}, sort_keys=True)]
    assert make_tuned(verbose=False).best_config(FakeArray(256, 512)) == best
    assert len(fake_gpu) == 4                       # and read back without a warning


_SAVER = textwrap.dedent('''
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    import tuned_kernel
    tuned, tag, count, go = tuned_kernel.add_one, sys.argv[2], int(sys.argv[3]), sys.argv[4]
    print(tuned.results_path(), flush=True)
    while not os.path.exists(go):       # start both savers together
        time.sleep(0.001)
    for i in range(count):
        tuned._write_result(f"{tag}-{i}", {"config": {"block_M": 64, "threads": 128}, "ms": i})
''')


def test_concurrent_saves_lose_no_result(tmp_path, cache_dir):
    """Two processes saving different keys into one record at once: the
    read-merge-write under the file lock keeps every key."""
    (tmp_path / "tuned_kernel.py").write_text(textwrap.dedent('''
        import tilemega, tilemega.language as T
        M = T.symbolic("M")

        @tilemega.autotune(configs=[{"block_M": 64, "threads": 128}], key=["M"], verbose=False)
        @tilemega.jit
        def add_one(A: T.Tensor((M, 128), "float32"), *, block_M: int, threads: int):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads):
                pass
    '''))
    go, count = tmp_path / "go", 150
    env = dict(os.environ, TILEMEGA_CACHE_DIR=str(cache_dir))
    savers = [subprocess.Popen([sys.executable, "-c", _SAVER, str(tmp_path), tag, str(count),
                                str(go)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for tag in ("a", "b")]
    paths = {p.stdout.readline().strip() for p in savers}    # both are ready
    go.touch()
    for p in savers:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    (path,) = paths
    results = json.load(open(path))["results"]
    expected = {f"{tag}-{i}" for tag in "ab" for i in range(count)}
    assert set(results) == expected, f"lost: {sorted(expected - set(results))[:10]}"
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".tmp-")]


def test_no_working_config_is_an_error(fake_gpu):
    @tilemega.autotune(configs=[{"threads": 100}, {"threads": 2048}], verbose=False)
    @tilemega.jit
    def k(A: T.Tensor((64,), "float32"), *, threads: int):
        with T.Kernel(1, threads=threads):
            pass
    with pytest.raises(RuntimeError, match=r"no configuration worked:\n  threads=100: "):
        k.best_config(FakeArray(64))


def test_autotune_arguments_are_checked():
    jit_fn = make_tuned().fn
    with pytest.raises(TypeError, match=r"config 0 .* names \['block_N'\]"):
        tilemega.autotune(configs=[{"block_N": 1}])(jit_fn)
    with pytest.raises(TypeError, match=r"autotune key 'K' is neither"):
        tilemega.autotune(configs=CONFIGS, key=["K"])(jit_fn)
    with pytest.raises(TypeError, match=r"above @tilemega.jit"):
        tilemega.autotune(configs=CONFIGS)(lambda A: None)
    with pytest.raises(ValueError, match="at least one config"):
        tilemega.autotune(configs=[])(jit_fn)


def _gpu_reason():
    return autotune_mod._gpu_unavailable_reason()


@pytest.mark.gpu
@pytest.mark.skipif(_gpu_reason() is not None, reason=f"needs a CUDA GPU: {_gpu_reason()}")
def test_gpu_autotune_times_real_kernels(capsys):
    import torch

    tuned = make_tuned(rep=20)
    a = torch.randn(512, 1024, device="cuda")
    b = tuned(a)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a + 1)
    err = capsys.readouterr().err
    assert "best:" in err and "[1/4]" in err
    record = json.load(open(tuned.results_path()))
    (result,) = record["results"].values()
    assert result["device"] == torch.cuda.get_device_name()
    assert all(t["ms"] > 0 for t in result["timings"])
    # Second call: no tuning output.
    tuned(a)
    assert "best:" not in capsys.readouterr().err
