"""sweeper.job.compute: one configuration's memory, estimated before the store."""

from __future__ import annotations


from conftest import cli, one_line


def test_a_configuration_too_large_for_memory_is_refused_before_the_store(tmp_path):
    store = tmp_path / "s.db"
    proc = cli(tmp_path, "depth=100", "width=4096", store=store)
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert (
        "depth=100 width=4096 dtype=float64 needs about" in line
        and "GiB" in line
        and "memory" in line
    )
    assert not store.exists()


def test_the_memory_estimate_of_one_configuration_counts_its_weights():
    from conftest import make_cfg
    from sweeper import data
    from sweeper.job.compute import config_bytes

    small, big = make_cfg("depth=1", "width=16"), make_cfg("depth=100", "width=4096")
    ds = data.load(small.data, small.seed)
    weights = 99 * (4096 * 4096 + 4096) * 8  # the hidden layers alone, float64
    assert config_bytes(small, ds) < 10 << 20 and config_bytes(big, ds) > 4 * weights
