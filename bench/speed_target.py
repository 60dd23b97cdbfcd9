"""The debugged process of the speed-after-detach benchmark (measure 6).

Times a pure-Python loop of calls, best of REPEATS, in the main thread and in another
thread; pauses once (MODE "raydebug": raydebug.set_trace through the hub; "adapter": stock
debugpy with its adapter process, the path of Ray's built-in debugger) while a client
attaches, steps and detaches; then times the same loop again in both threads, the other
thread having existed during the session. Prints "ratio THREAD before/after".
"""

import sys
import threading
import timeit

MODE = sys.argv[1]
REPEATS = 9


def work() -> int:
    def add(a: int, b: int) -> int:
        return a + b

    total = 0
    for i in range(200_000):
        total = add(total, i)
    return total


def best_time() -> float:
    return min(timeit.repeat(work, number=1, repeat=REPEATS))


def in_thread(results: dict, go: threading.Event) -> None:
    go.wait()
    results["thread"] = best_time()


before = {"main": best_time()}
go = threading.Event()
go.set()
first = threading.Thread(target=in_thread, args=(before, go))
first.start()
first.join()

go_after = threading.Event()
after: dict = {}
late = threading.Thread(target=in_thread, args=(after, go_after))
late.start()  # exists during the debug session, timed after it
if MODE == "adapter":
    import debugpy

    _, port = debugpy.listen(("127.0.0.1", 0))
    print(f"PORT {port}", flush=True)
    debugpy.wait_for_client()
print("PAUSE", flush=True)
breakpoint()  # raydebug.set_trace or debugpy.breakpoint, by PYTHONBREAKPOINT
stepped = 1  # the client steps over these two lines, then detaches
stepped += 1
if MODE == "raydebug":
    from raydebug.agent import get_agent

    assert get_agent().debugger.wait_untraced(10), "tracing was not removed"
after["main"] = best_time()
go_after.set()
late.join()
for key in ("main", "thread"):
    print(f"ratio {key} {before[key] / after[key]:.4f}", flush=True)
