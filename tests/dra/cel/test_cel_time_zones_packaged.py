"""CEL timestamp accessors name IANA zones; the zone data must come with gpuclaim, not from the image.

The chart's image is a slim Python image that may have no /usr/share/zoneinfo; `zoneinfo` then falls back to the
`tzdata` package, which pyproject declares. PYTHONTZPATH pointing nowhere makes the system database invisible.
"""

import os
import subprocess
import sys


def test_a_zone_accessor_works_without_the_system_zone_database() -> None:
    env = {**os.environ, "PYTHONTZPATH": "/nonexistent"}
    expr = 'timestamp("2024-07-01T12:00:00Z").getHours("America/New_York") == 8'  # EDT, UTC-4
    done = subprocess.run([sys.executable, "-m", "gpuclaim", "cel", expr], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "true"), done.stderr
