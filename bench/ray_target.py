"""Driver of the Ray benchmark: MODE is "raydebug" (runtime_env enabled) or "ray" (Ray's
built-in debugger, RAY_DEBUG=1: debugpy in the worker). Each round submits a task to the
same worker (a new one after the benchmark killed it) that writes "time rss pid" to a file
and calls breakpoint()."""

import os
import sys
import threading
import time

import ray

mode, address, marks, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
runtime_env = {"env_vars": {"RAY_DEBUG": "1"}}
if mode == "raydebug":
    import raydebug

    runtime_env = raydebug.runtime_env()
ray.init(address=address, runtime_env=runtime_env, logging_level="ERROR")


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS")).split()[1])


@ray.remote(num_cpus=0, max_retries=0)  # the last rounds are killed: no retry
def paused(round_number: int) -> int:
    if not hasattr(paused, "threads"):  # four background threads, as in the core benchmark
        stop = threading.Event()
        for _ in range(4):
            threading.Thread(target=lambda: [sum(range(200)) for _ in iter(
                lambda: stop.wait(0.001), True)], daemon=True).start()
        paused.threads = stop
    total = 0
    with open(f"{marks}.{round_number}", "w") as mark:
        mark.write(f"{time.time()} {rss_kib()} {os.getpid()}")
    breakpoint()
    for i in range(1_000_000):  # `next` walks these two lines
        total += i * round_number
    return total


for round_number in range(rounds):
    try:
        ray.get(paused.remote(round_number))
    except ray.exceptions.WorkerCrashedError:
        pass  # the benchmark killed it
print("END", flush=True)
