"""The debugged process of the "after the client leaves" benchmarks (bench/speed_leave.py).

Times ``fib(N)`` untraced (best of 5), starts a ticker thread that records how long each
1 ms sleep really took (a stall of the process shows as a long tick), pauses once, and after
the client resumes it keeps calling ``fib(N)`` for ``SECONDS``, recording when each call
ended (wall clock, comparable with the client's) and how long it took. Prints one JSON line.
"""

import json
import sys
import threading
import time

SECONDS = float(sys.argv[1])
N = 20


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def timed() -> float:
    start = time.perf_counter()
    fib(N)
    return time.perf_counter() - start


baseline = min(timed() for _ in range(5))
ticks: list[tuple[float, float]] = []  # (wall time at the end of a tick, its length)
stop_ticking = threading.Event()


def ticker() -> None:
    last = time.perf_counter()
    while not stop_ticking.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        ticks.append((time.time(), now - last))
        last = now


ticking = threading.Thread(target=ticker, name="ticker", daemon=True)
ticking.start()
time.sleep(0.5)  # ticks of the idle process, before any debugging: the machine's own noise
paused = time.time()
breakpoint()
resumed = time.time()
calls: list[tuple[float, float]] = []
while time.time() - resumed < SECONDS:
    took = timed()
    calls.append((time.time(), took))
stop_ticking.set()
ticking.join()
print(json.dumps({"baseline": baseline, "paused": paused, "resumed": resumed, "calls": calls,
                  "ticks": [t for t in ticks if t[0] >= resumed - 0.5],
                  "idle_ticks": [t for t in ticks if t[0] <= paused]}), flush=True)
