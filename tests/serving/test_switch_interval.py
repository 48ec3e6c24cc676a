"""While a server runs, a worker thread (big bodies, big selectors) gives the GIL back to the event loop within
0.5 ms instead of CPython's 5 ms (measured: ordinary admissions' p99 during 250 big pods, 10-21 ms -> 8-12 ms);
the setting is process-wide, so `serve` puts the previous value back when it returns."""

from __future__ import annotations

import sys
from pathlib import Path

from gpuclaim.serving import run as serving

from . import served


async def test_serving_shortens_the_switch_interval_and_restores_it(tmp_path: Path) -> None:
    before = sys.getswitchinterval()
    assert before > serving.SWITCH_INTERVAL_SECONDS  # CPython's default, 5 ms
    async with served.serve("webhook", tmp_path, {}):
        assert sys.getswitchinterval() <= serving.SWITCH_INTERVAL_SECONDS * 1.01
    assert sys.getswitchinterval() == before
