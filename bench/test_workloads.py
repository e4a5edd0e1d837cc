"""Every workload of ``braidlog bench``, one bench each (a workload added to
``braidlog.bench.WORKLOADS`` is benched here without being listed)."""

from __future__ import annotations

import pytest

from braidlog import bench


@pytest.mark.parametrize("name", bench.WORKLOADS)
def test_workload(run_workload, name):
    report = run_workload(name)
    assert report.rows or report.skipped, f"the {name} workload measured nothing and said why not"
