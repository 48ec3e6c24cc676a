"""An interrupt (Ctrl-C, or SIGTERM, which the demo turns into one) can arrive while `Stack` is starting a child.
Popen only returns once the child has exec'd, so an interrupt raised inside it used to leave a running child in its
own session that `Stack.stop()` never knew of: the interrupted-demo test found such extenders long after it ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Runs in its own process, so the storm of SIGINTs hits only the code under test, never pytest. The handler raises
# KeyboardInterrupt as Python's default does, but only while a spawn is armed, and disarms itself as it raises: an
# interrupt can end a spawn, never the script.
SCRIPT = """
import os, signal, sys, threading, time
from pathlib import Path
from gpuclaim.demo import stack

workdir, marker, spawns = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
(workdir / "logs").mkdir()
running = stack.Stack(workdir)
armed = False

def on_sigint(signum, frame):
    global armed
    if armed:
        armed = False
        raise KeyboardInterrupt

def storm():  # a SIGINT every millisecond: many land inside Popen's wait for the child's exec
    while True:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.001)

signal.signal(signal.SIGINT, on_sigint)
threading.Thread(target=storm, daemon=True).start()
interrupted = 0
for n in range(spawns):
    try:
        armed = True
        running._spawn(f"child-{n}", [sys.executable, "-c", "import time; time.sleep(60)", marker])
        armed = False
    except KeyboardInterrupt:
        interrupted += 1
running.stop()
print(interrupted)
"""


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_child_started_while_interrupts_arrive_is_always_one_stop_ends(tmp_path: Path) -> None:
    marker = f"gpuclaim-stack-interrupt-test-{os.getpid()}-{time.monotonic_ns()}"
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), marker, "40"], cwd=REPO,
                         capture_output=True, text=True, timeout=100)
    leaked = [pid for pid in _processes_with(marker) if pid != os.getpid()]
    for pid in leaked:
        os.kill(pid, signal.SIGKILL)
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout) > 0  # the interrupts did arrive while children were being started
    assert leaked == []
