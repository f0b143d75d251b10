"""Resident grids in the runtime, without a GPU: a kernel whose artifact
says `resident` launches as many blocks as the device keeps resident (whole
clusters: cuOccupancyMaxActiveClusters), at most its grid, decided once a
device and the same on both launch paths; `cluster` and `resident` are
validated, and a grid override may be any whole number of clusters up to
the bound."""

import os

import pytest

from conftest import write_artifact
from test_runtime import FakeDriver, _torch_args, fake_torch  # noqa: F401

from tilemega.runtime import ArgumentError, LaunchError, load_artifact


class OccupancyDriver(FakeDriver):
    """Also answers the occupancy queries: `clusters` clusters or
    `per_sm` blocks an SM on `sms` SMs."""

    class CUlaunchConfig:
        pass

    class CUdevice_attribute:
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def cuFuncSetAttribute(self, function, attr, value):
        return (0,)

    def __init__(self, clusters=30, sms=132, per_sm=1):
        super().__init__(sizes=[8, 8, 4, 4])
        self.clusters, self.sms, self.per_sm = clusters, sms, per_sm
        self.queries = []

    def cuOccupancyMaxActiveClusters(self, function, config):
        self.queries.append(("clusters", config.gridDimX, config.blockDimX,
                             config.sharedMemBytes))
        return (0, self.clusters)

    def cuDeviceGetAttribute(self, attr, dev):
        return (0, 232448 if attr == 97 else self.sms)

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, function, threads, smem):
        self.queries.append(("blocks", threads, smem))
        return (0, self.per_sm)


@pytest.fixture
def occupancy(monkeypatch):
    from tilemega.runtime import artifact, driver

    def install(**kwargs):
        drv = OccupancyDriver(**kwargs)
        monkeypatch.setattr(driver, "_cuda", drv)
        monkeypatch.setattr(driver, "_device_count", 1)
        monkeypatch.setattr(driver, "_primary", {})
        monkeypatch.setattr(artifact, "check_ptx", lambda ptx, spec, where: None)
        return drv
    return install


def resident(meta, grid=132, cluster=4, smem=213144):
    k = meta["kernels"][0]
    k.update(grid=[grid, 1, 1], resident=True, dynamic_shared_bytes=smem)
    if cluster > 1:
        k["cluster"] = cluster
    return meta


@pytest.mark.parametrize("path", ["fast", "general"])
def test_clusters_that_fit_set_the_grid(tmp_path, base_meta, fake_torch, occupancy, path):
    # 33 clusters of 4 asked, 30 co-resident: 120 blocks, queried once.
    drv = occupancy(clusters=30)
    k = load_artifact(write_artifact(tmp_path, resident(base_meta))).add_one
    assert (k.spec.resident, k.spec.cluster, k.spec.grid) == (True, 4, (132, 1, 1))
    launch = k if path == "fast" else k.launch
    launch(*_torch_args(fake_torch))
    launch(*_torch_args(fake_torch))
    assert [x["grid"] for x in drv.launches] == [(120, 1, 1)] * 2
    assert drv.queries == [("clusters", 132, 128, 213144)]


def test_the_bound_caps_the_grid_and_plain_blocks_count_sms(tmp_path, base_meta, fake_torch,
                                                            occupancy):
    # Without clusters: SMs x blocks an SM (2 x 132 = 264), capped at 200.
    drv = occupancy(sms=132, per_sm=2)
    k = load_artifact(write_artifact(tmp_path, resident(base_meta, grid=200, cluster=1,
                                                        smem=1024))).add_one
    k(*_torch_args(fake_torch))
    assert drv.launches[0]["grid"] == (200, 1, 1)
    assert drv.queries == [("blocks", 128, 1024)]


def test_no_cluster_fits_is_a_launch_error(tmp_path, base_meta, fake_torch, occupancy):
    occupancy(clusters=0)
    k = load_artifact(write_artifact(tmp_path, resident(base_meta))).add_one
    with pytest.raises(LaunchError, match=r"cannot keep one cluster of 4 blocks of 128 threads "
                                          r"and 213144 bytes of shared memory resident"):
        k.launch(*_torch_args(fake_torch))


def test_grid_overrides_of_a_resident_kernel(tmp_path, base_meta, fake_torch, occupancy):
    drv = occupancy()
    k = load_artifact(write_artifact(tmp_path, resident(base_meta))).add_one
    k.launch(*_torch_args(fake_torch), grid=8)                # two clusters: the stride is 8
    assert drv.launches[-1]["grid"] == (8, 1, 1)
    for bad in (6, 136, (4, 2)):
        with pytest.raises(ArgumentError, match=r"is not a resident grid of this kernel: 1-D, "
                                                r"at most 132 blocks, whole clusters of 4"):
            k.launch(*_torch_args(fake_torch), grid=bad)


@pytest.mark.parametrize("over, field", [
    (dict(cluster=3), "kernels[0].grid[0]': 8 blocks are not whole clusters of 3"),
    (dict(cluster=16), "kernels[0].cluster': clusters have 1 to 8 blocks, got 16"),
    (dict(cluster=0), "kernels[0].cluster'"),
    (dict(resident="yes"), "kernels[0].resident': expected true or false, got 'yes'"),
    (dict(resident=True), "kernels[0].resident': a resident grid is 1-D, got grid [8, 8, 1]"),
    (dict(resident=True, grid=[8, 1, 1], mega={}),
     "kernels[0].resident': a persistent mega-kernel's grid is its schedule's"),
])
def test_bad_fields_name_the_field(tmp_path, base_meta, over, field):
    base_meta["kernels"][0].update(over)
    path = write_artifact(tmp_path, base_meta)
    with pytest.raises(ValueError) as info:
        load_artifact(path)
    assert os.path.basename(path) in str(info.value) and field in str(info.value)


def test_info_says_the_grid_is_resident(tmp_path, base_meta, capsys):
    from tilemega.runtime.__main__ import main as cli_main
    assert cli_main(["info", write_artifact(tmp_path, resident(base_meta))]) == 0
    assert ("kernel add_one: resident grid of at most 132 (as many as fit) clusters of 4 "
            "block [128, 1, 1]") in capsys.readouterr().out


@pytest.mark.parametrize("path", ["fast", "general"])
def test_a_failed_launch_names_the_grid_launched(tmp_path, base_meta, fake_torch, occupancy, path):
    drv = occupancy(clusters=30)
    k = load_artifact(write_artifact(tmp_path, resident(base_meta))).add_one
    drv.launch_result = 701
    launch = k if path == "fast" else k.launch
    with pytest.raises(LaunchError, match=r"grid=\(120, 1, 1\)"):
        launch(*_torch_args(fake_torch))


def test_more_shared_memory_sizes_the_grid_again(tmp_path, base_meta, fake_torch, occupancy):
    drv = occupancy(clusters=30)
    k = load_artifact(write_artifact(tmp_path, resident(base_meta, smem=100000))).add_one
    k.launch(*_torch_args(fake_torch))
    drv.clusters = 15                       # fewer fit with more shared memory
    k.launch(*_torch_args(fake_torch), dynamic_shared_bytes=200000)
    k.launch(*_torch_args(fake_torch))
    assert [x["grid"] for x in drv.launches] == [(120, 1, 1), (60, 1, 1), (120, 1, 1)]
    assert [q[3] for q in drv.queries] == [100000, 200000]
