"""The debugged process of the core benchmark. MODE decides how it pauses:

raydebug  breakpoint() -> raydebug.set_trace (PYTHONBREAKPOINT, RAYDEBUG_HUB set by the runner)
direct    stock debugpy, in-process adapter: listen, wait_for_client, breakpoint
nodelay   the same with TCP_NODELAY on pydevd's socket: the floor a relay adds to
adapter   stock debugpy, default adapter process (what Ray's built-in debugger runs)

It starts four background threads that wake every millisecond (a Ray worker has several),
prints "T <time>" right before pausing, and pauses ROUNDS times in a loop.
"""

import os
import sys
import threading
import time

MODE = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 1


def background(stop: threading.Event) -> None:
    while not stop.wait(0.001):
        sum(range(200))


stop = threading.Event()
for index in range(4):
    threading.Thread(target=background, args=(stop,), name=f"background-{index}",
                     daemon=True).start()


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS")).split()[1])


def before_pause() -> None:
    """What happens before breakpoint(): print the time; for stock debugpy, listen and
    wait for a client the way Ray's built-in debugger does."""
    print(f"T {time.time()} {rss_kib()}", flush=True)
    if MODE == "raydebug":
        return
    import debugpy

    if not debugpy.is_client_connected():
        if not hasattr(before_pause, "port"):
            _, before_pause.port = debugpy.listen(
                ("127.0.0.1", 0), in_process_debug_adapter=MODE in ("direct", "nodelay"))
            if MODE == "nodelay":
                import socket

                from _pydevd_bundle.pydevd_constants import get_global_debugger

                server = get_global_debugger()._waiting_for_connection_thread._server_socket
                server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        print(f"PORT {before_pause.port} {time.time()} {os.getpid()}", flush=True)
        debugpy.wait_for_client()


def stepping_ground(round_number: int) -> int:
    total = 0
    before_pause()
    breakpoint()  # raydebug.set_trace or debugpy.breakpoint, by PYTHONBREAKPOINT
    for i in range(1_000_000):  # `next` walks these two lines
        total += i * round_number
    return total


for round_number in range(ROUNDS):
    stepping_ground(round_number)
stop.set()
print("END", flush=True)
