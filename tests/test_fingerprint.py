from __future__ import annotations

import copy

from hwcore import fingerprint as fpmod


def test_fields_present():
    fp = fpmod.fingerprint()
    for key in (
        "node_id", "stack_id", "hostname", "cpu_model", "cpu_flags", "cores_logical", "cores_usable",
        "memory_bytes", "caches_bytes", "gpus", "gpu_count", "gpu_driver", "os", "python", "packages",
        "blas", "env", "suite_git",
    ):
        assert key in fp, key
    assert fp["cores_logical"] >= 1
    assert fp["memory_bytes"] > 2**28
    assert set(fpmod.CPU_FLAGS) == set(fp["cpu_flags"])
    for pkg in ("numpy", "torch", "jax"):
        assert pkg in fp["packages"]
    assert fp["packages"]["numpy"]
    assert isinstance(fp["blas"], list)
    assert len(fp["node_id"]) == 16


def test_node_id_is_stable():
    a = fpmod.fingerprint(refresh=True)
    b = fpmod.fingerprint(refresh=True)
    assert a["node_id"] == b["node_id"]
    assert a["stack_id"] == b["stack_id"]


def test_perf_env_vars_recorded_and_change_stack(monkeypatch):
    before = fpmod.fingerprint(refresh=True)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    after = fpmod.fingerprint(refresh=True)
    assert after["env"]["OMP_NUM_THREADS"] == "1"
    assert after["node_id"] == before["node_id"]
    assert after["stack_id"] != before["stack_id"]
    fpmod.fingerprint(refresh=True)


def test_compare_flags_different_stacks():
    a = fpmod.fingerprint()
    b = copy.deepcopy(a)
    assert not fpmod.compare(a, b)["stack_differs"]
    assert fpmod.stack_warning(a, b) is None
    b["packages"]["torch"] = "0.0.1"
    cmp = fpmod.compare(a, b)
    assert cmp["stack_differs"] and cmp["same_node"]
    assert "packages.torch" in cmp["differences"]
    assert "torch" in fpmod.stack_warning(a, b)


def test_cache_sizes_parse():
    sizes = fpmod.cache_sizes()
    assert all(v > 0 for v in sizes.values())
    assert fpmod.last_level_cache_bytes() >= max(sizes.values(), default=0)
