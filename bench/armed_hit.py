"""Time from a process reaching a cluster breakpoint's line to the IDE's ``stopped`` (issue
17's goals: <= 250 ms for the first stop in a process, <= 20 ms for later ones), one run:

an IDE-like client (a cluster session taking each ``startDebugging`` as VS Code does) sets a
breakpoint before a live process (``RAYDEBUG_LIVE=1``) starts; the process stamps the time
just before it calls the function whose line has the breakpoint. The first stop includes
the session's registration, the child's offer, connection, attach and pydevd's start; later
stops (the same process, its child still attached) are pydevd's own, with the same
breakpoints.

    python bench/armed_hit.py [LATER_STOPS]    # default 20
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # devtools, shared with tests/
from devtools.ide import IdeLikeClient
from devtools.processes import line_of, start_hub, write_script

JOB = """
import sys, time

def work(n):
    return n * 2  # breakpoint line

for n in range(int(sys.argv[1]) + 1):
    sys.stdin.readline()  # the bench says go
    print(time.time(), flush=True)
    work(n)
"""


async def measure(later: int, directory: Path) -> tuple[float, list[float]]:
    hub = start_hub()
    script = write_script(directory, "job.py", JOB)
    try:
        ide = IdeLikeClient(hub)
        attach = await ide.open_cluster()
        parent = ide.parent
        assert parent is not None
        await parent.request("setBreakpoints", {"source": {"path": str(script)},
                                                "breakpoints": [{"line": line_of(
                                                    script, "breakpoint line")}]})
        await parent.request("configurationDone")
        await attach
        proc = subprocess.Popen([sys.executable, str(script), str(later)],
                                env=hub.env(RAYDEBUG_LIVE="1"), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        hub.workers.append(proc)
        assert proc.stdin is not None and proc.stdout is not None
        await asyncio.to_thread(hub.wait_linked, 1)  # linked, and so armed
        proc.stdin.write("\n")
        proc.stdin.flush()
        reached = float(await asyncio.to_thread(proc.stdout.readline))
        child, _configuration, thread_id = await ide.next_child()
        first = time.time() - reached
        times = []
        for _ in range(later):
            await child.request("continue", {"threadId": thread_id})
            proc.stdin.write("\n")
            proc.stdin.flush()
            reached = float(await asyncio.to_thread(proc.stdout.readline))
            stop = await child.wait_event("stopped", timeout=30)
            times.append(time.time() - reached)
            thread_id = stop.body["threadId"]
        await child.request("disconnect", {})
        await child.close()
        await parent.close()
        return first, times
    finally:
        hub.close()


def main() -> None:
    import tempfile

    later = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with tempfile.TemporaryDirectory() as directory:
        first, times = asyncio.run(asyncio.wait_for(measure(later, Path(directory)), 120))
    print(f"line reached -> IDE stopped, first stop in a process: {first * 1000:.0f} ms "
          "(goal <= 250)")
    print(f"later stops ({len(times)}): median {statistics.median(times) * 1000:.1f} ms, "
          f"max {max(times) * 1000:.1f} ms (goal <= 20)")


if __name__ == "__main__":
    main()
