"""Starting a cluster's hub actor for the CLI: a short-lived Ray driver in a process of its
own, so that it can be bounded (and the same child for the CLI's other driver work:
``raydebug link``'s, :func:`run_in_driver`).

Theory of operation. Only a Ray driver can ask for the hub actor, and ``ray.init`` takes no
time limit: when it cannot reach the cluster's GCS as the address it computed, it retries
for minutes, deaf to Ctrl-C. So the CLI runs the driver as a child (``python -m`` this
module, naming the function to run once connected), waits for its "connected" line for up
to :data:`RAY_CONNECT_TIMEOUT`, then for its answer (the hub: up to
:data:`HUB_WAIT_TIMEOUT`), and otherwise (or on Ctrl-C) kills it and says which step did
not finish, with the last thing Ray said. On a cluster whose node is on loopback, reached at
a loopback address, the child is told to stay there (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``,
which Ray reads once, at its import: hence a child): Ray would else rewrite 127.0.0.1 to the
machine's network address, where such a cluster does not listen. The child inherits
``RAY_AUTH_MODE`` (see :mod:`.cluster_auth`).
"""

from __future__ import annotations

import collections
import importlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import IO, Any

from ...errors import HubUnreachableError
from .discovery import (
    LOOPBACK_VARIABLE,
    HubInfo,
    connect_kv,
    read_hub_info,
    stays_on_loopback,
)

RAY_CONNECT_TIMEOUT = 30.0  # ray.init to a cluster it can reach: 2-10 s on a loaded machine
# The child's own wait for the actor (hub_actor.HUB_START_TIMEOUT, 60 s) ends first, so
# that its error, not this bound, is what the user reads.
HUB_WAIT_TIMEOUT = 70.0
CONNECTED = "connected"
CONNECT_STEP = "connect to it as a Ray driver"
CONNECT_ERROR = "connect_error"  # the child's answer when ray.init raised: its first line
RAY_LOG_PREFIX = re.compile(r"^\[[^]]*\] ")  # "[2026-12-02 02:51:39,712 W 1010 1010] "


def find_or_start_cluster_hub(address: str | None,
                              starting: Callable[[str], None] = lambda gcs: None
                              ) -> tuple[HubInfo, str]:
    """For the CLI: the hub of the cluster ``address`` names, started (as the first pause
    would start it) when it has none yet; and the GCS address. Starting it takes a
    short-lived driver, which needs this machine to be one of the cluster's nodes (see
    :func:`start_cluster_hub`), and seconds: ``starting(gcs_address)`` is called first, for
    the CLI to say so. Bounded; raises :class:`HubUnreachableError` saying why."""
    gcs_address = connect_kv(address)
    info = read_hub_info()
    if info is not None:
        return info, gcs_address
    starting(gcs_address)
    return start_cluster_hub(gcs_address, driver_keeps_to_loopback(gcs_address)), gcs_address


def starting_hub(gcs_address: str) -> str:
    """What the CLI says while the cluster's hub starts (seconds, which it would otherwise
    spend silent)."""
    return (f"the Ray cluster at {gcs_address} has no raydebug hub yet: starting it (a few "
            "seconds, once)")


def driver_keeps_to_loopback(gcs_address: str) -> bool:
    """Whether a driver of the cluster at ``gcs_address`` (reached by :func:`connect_kv`)
    must keep to loopback (:func:`.discovery.stays_on_loopback`)."""
    from ray.experimental import internal_kv

    return stays_on_loopback(gcs_address, internal_kv.internal_kv_get_gcs_client())


def start_cluster_hub(gcs_address: str, loopback: bool) -> HubInfo:
    """The hub of the cluster at ``gcs_address``, started by a child driver (or found, if
    another started it meanwhile). ``loopback``: the driver must keep to loopback
    (:func:`.discovery.stays_on_loopback`). Raises :class:`HubUnreachableError` saying
    which step failed or did not finish in time; the child has ended by then (killed if
    need be)."""
    answer = run_in_driver(
        gcs_address, loopback, f"{__name__}:started_hub", "", "start the raydebug hub actor",
        HUB_WAIT_TIMEOUT, f"the Ray cluster at {gcs_address} has no raydebug hub yet, and "
                          "this machine could not {step} to start one",
        f"; run `raydebug hub --ray-address {gcs_address}` on a node of the cluster, or wait "
        "for the first breakpoint")
    return HubInfo(**answer)


def started_hub(_: str) -> dict[str, Any]:
    """In the child driver: the cluster's hub, started if need be."""
    from .hub_actor import find_or_start_hub

    return asdict(find_or_start_hub())


def run_in_driver(gcs_address: str, loopback: bool, work: str, argument: str, step: str,
                  bound: float, failure: str, advice: str = "") -> dict[str, Any]:
    """Run ``work`` (``module:function``, taking ``argument`` and returning a dict for JSON)
    in a child process connected to the cluster at ``gcs_address`` as a Ray driver (kept
    to loopback if ``loopback``); its answer. The child is given
    :data:`RAY_CONNECT_TIMEOUT` to connect, then ``bound`` seconds for ``work`` (``step``
    says what it does), and is killed past them or on Ctrl-C. Raises
    :class:`HubUnreachableError` with what the function raised, or ``failure`` (a sentence
    with ``{step}`` in it) and why (then ``advice``, when Ray refused the driver)."""
    env = {**os.environ, **({LOOPBACK_VARIABLE: "0"} if loopback else {})}
    child = subprocess.Popen(
        [sys.executable, "-m", __name__, gcs_address, "1" if loopback else "0", work, argument],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env)
    assert child.stdout is not None and child.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()  # its stdout; None once it closed
    said: collections.deque[str | None] = collections.deque(maxlen=20)  # its stderr's end
    readers = [threading.Thread(target=_read, args=(child.stdout, lines.put), daemon=True),
               threading.Thread(target=_read, args=(child.stderr, said.append), daemon=True)]
    for reader in readers:
        reader.start()
    doing, waited, line = CONNECT_STEP, RAY_CONNECT_TIMEOUT, None
    try:
        line = _next_line(lines, waited)
        if line == CONNECTED:
            doing, waited = step, bound
            line = _next_line(lines, waited)
    finally:  # (Ctrl-C too: the child must not outlive the command)
        timed_out = child.poll() is None and line in (None, CONNECTED)
        if timed_out:
            child.kill()
        child.wait()
        for reader in readers:
            reader.join(timeout=5)
    if line is None or line == CONNECTED:
        how = f"gave up after {waited:g} s" if timed_out else \
            f"the driver exited with status {child.returncode}"
        raise HubUnreachableError(
            f"{failure.format(step=doing)} ({how}{_last_said(said)})", gcs_address)
    answer: dict[str, Any] = json.loads(line)
    if CONNECT_ERROR in answer:
        raise HubUnreachableError(f"{failure.format(step=CONNECT_STEP)} "
                                  f"({answer[CONNECT_ERROR]}){advice}", gcs_address)
    if "error" in answer:
        raise HubUnreachableError(answer["error"], gcs_address)
    return answer


def _read(stream: IO[str], keep: Callable[[str | None], None]) -> None:
    """Hand each line of ``stream`` to ``keep``, then None at its end."""
    for line in stream:
        keep(line.rstrip("\n"))
    keep(None)


def _next_line(lines: queue.Queue[str | None], timeout: float) -> str | None:
    """The child's next line for us on stdout (:data:`CONNECTED` or JSON: a library may
    print other lines); None when it closed stdout or ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if line is None or line == CONNECTED or line.startswith("{"):
            return line


def _last_said(said: Iterable[str | None]) -> str:
    """``; Ray said: <its last line>`` from the child's stderr (without the time and pids
    of Ray's C++ log prefix), or nothing."""
    meaningful = [line.strip() for line in said if line and not line[0].isspace()]
    if not meaningful:
        return ""
    return "; Ray said: " + RAY_LOG_PREFIX.sub("", meaningful[-1])[:300]


def _main(gcs_address: str, loopback: bool, work: str, argument: str) -> int:
    """The child: connect as a driver, say so, then print what ``work`` returns as JSON (or
    the error, one line, as ``{"error": ...}``)."""
    import logging

    import ray

    from .hub_actor import HUB_ACTOR_NAMESPACE

    try:
        ray.init(address=gcs_address, namespace=HUB_ACTOR_NAMESPACE, log_to_driver=False,
                 logging_level=logging.WARNING,
                 _node_ip_address="127.0.0.1" if loopback else None)
    except Exception as error:
        first_line = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        print(json.dumps({CONNECT_ERROR: first_line}), flush=True)
        return 1
    print(CONNECTED, flush=True)
    module, _, function = work.partition(":")
    try:
        answer = getattr(importlib.import_module(module), function)(argument)
    except Exception as error:  # HubUnreachableError, or Ray's own
        print(json.dumps({"error": str(error).splitlines()[0]}), flush=True)
        return 1
    finally:
        ray.shutdown()
    print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4]))
