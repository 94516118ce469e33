"""Chaos: three concurrent ``maintenance run`` processes, random SIGKILLs (see ``chaos.py``).

Sized by ``$POWERPLANE_CHAOS_SIZE`` (default 60 maintenances, in rounds of 30 nodes);
``bench/bench_settle.py --chaos 300`` runs the full size.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chaos import run_chaos


@pytest.mark.slow
def test_random_sigkills_of_three_runners_keep_every_verb_at_most_once(
    tmp_path: Path,
) -> None:
    size = int(os.environ.get("POWERPLANE_CHAOS_SIZE", "60"))
    report = run_chaos(tmp_path, maintenances=size, workers=min(size, 30), seed=13,
                       timeout_s=60)
    assert report.maintenances == size
    assert report.kills > 0
    assert report.violations == []
    assert sum(report.applied.values()) >= size  # every maintenance applied its verb
