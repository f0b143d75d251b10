"""GPU tests of how a MegaKernel is launched: cooperatively (the driver refuses
a grid that cannot be resident), serialised across streams, still capturable
in a CUDA graph. They use the hand-written stand-in kernel of
test_mega_runtime.py (FAKE_MEGA_PTX: CTA 0 thread 0 adds 1 to mega_state[0]
without an atomic), so they compile nothing with TileMega. Skipped unless
cuda-python imports, torch is installed and a CUDA device is present."""

import pytest

from conftest import gpu_skip_reason
from tilemega.runtime import LaunchError, load_mega
from tilemega.runtime import driver

from test_mega_runtime import FAKE_MEGA_PTX, _artifact, aot_jit, mega

_REASON = gpu_skip_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

# More CTAs of 128 threads than any GPU keeps resident (H200: 132 SMs x 16).
TOO_MANY = 100_000


@pytest.fixture
def torch():
    import torch
    return torch


def _bound(tmp_path, torch, meta=None):
    mk = load_mega(_artifact(tmp_path, meta or aot_jit(), ptx=FAKE_MEGA_PTX))
    mk.bind(x=torch.full((4,), 2.0, device="cuda"), w=torch.full((4,), 3.0, device="cuda"),
            out=torch.zeros(4, device="cuda"))
    return mk


def _too_wide():
    # TOO_MANY workers, one entry on worker 0, no JIT queue: grid [TOO_MANY, 1, 1].
    return mega([("A", 1)], [], [(0, 0)], [[]], [[]], [[0]] + [[]] * (TOO_MANY - 1))


def test_device_supports_cooperative_launch():
    assert driver.device_attribute(0, "COOPERATIVE_LAUNCH") == 1


def test_static_residency_check_comes_first(tmp_path, torch):
    mk = _bound(tmp_path, torch, _too_wide())
    with pytest.raises(LaunchError, match=rf"needs all of its {TOO_MANY} CTAs \({TOO_MANY} "
                                          r"workers\) resident at once, but device 0 keeps at"):
        mk.launch()


def test_driver_refuses_a_grid_that_cannot_be_resident(tmp_path, torch, monkeypatch):
    mk = _bound(tmp_path, torch, _too_wide())
    mk.allocate()
    monkeypatch.setattr(mk, "check_resident", lambda: setattr(mk, "_resident_on", mk._device))
    with pytest.raises(LaunchError, match=r"cuLaunchCooperativeKernel\('g'.*"
                                          r"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE \(720\): the "
                                          rf"driver refuses .* whose {TOO_MANY} CTAs") as info:
        mk.launch()
    assert info.value.code == 720
    torch.cuda.synchronize()                  # nothing was launched, nothing hangs


def test_general_path_is_cooperative_too(tmp_path, torch, monkeypatch):
    mk = _bound(tmp_path, torch, _too_wide())
    args = mk._arguments()
    with pytest.raises(LaunchError, match="COOPERATIVE_LAUNCH_TOO_LARGE"):
        mk.kernel.launch(*args, sync=True)


def test_launch_on_another_stream_waits_for_the_previous_launch(tmp_path, torch):
    mk = _bound(tmp_path, torch)
    mk(check=True)                            # module, buffers, residency: epoch 1
    slow, fast = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(slow):
        torch.cuda._sleep(200_000_000)        # ~0.1 s of GPU time before the launch
        mk.launch()
    with torch.cuda.stream(fast):
        mk.launch()
        seen = mk.buffers["mega_state"].clone()   # stream-ordered after the second launch
    torch.cuda.synchronize()
    # Unserialised, the second launch would run during the sleep and see epoch 1.
    assert seen[0].item() == 3
    assert mk.epoch == 3


def test_launches_from_two_threads_all_count(tmp_path, torch):
    import threading
    mk = _bound(tmp_path, torch)
    mk(check=True)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]

    def worker(stream):
        with torch.cuda.stream(stream):
            for _ in range(50):
                mk.launch()

    threads = [threading.Thread(target=worker, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    # the stand-in's epoch increment is not atomic: overlapping launches lose counts
    assert mk.epoch == 101


def test_capture_after_a_launch_on_another_stream(tmp_path, torch):
    mk = _bound(tmp_path, torch)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        mk.launch()                           # first launch outside the capture stream
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):             # a cooperative launch, captured
        mk.launch()
    assert mk.epoch == 1
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    mk.launch()                               # after the capture: an ordinary launch again
    mk.check()
    assert mk.epoch == 5
