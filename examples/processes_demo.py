"""`make demo-processes`: raydebug without Ray: one hub, two paused processes.

It starts a real hub, two real Python processes that hit breakpoint(), shows the session
list, then a scripted DAP client (the same path VS Code takes) inspects each process and
lets it continue. Everything it starts, it stops.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from rich.console import Console

from raydebug import views
from raydebug.client.dap import DapClient
from raydebug.client.hub_api import list_sessions

console = Console()

JOB = textwrap.dedent("""
    import os, sys

    def train_step(rank, batch):
        loss = 1.0 / (batch + rank + 1)
        breakpoint()  # inspect me from the hub
        print(f"rank {rank}: batch {batch} done, loss={loss:.4f}", flush=True)

    train_step(int(os.environ["RANK"]), batch=7)
""")


def start_hub() -> tuple[subprocess.Popen[str], str, str, str]:
    token = os.urandom(12).hex()
    hub = subprocess.Popen([sys.executable, "-m", "raydebug", "hub", "--port", "0",
                            "--agent-port", "0", "--token", token],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert hub.stdout is not None
    words = hub.stdout.readline().split()  # "raydebug hub ready: clients H:P agents H:P"
    if len(words) < 7:
        hub.kill()
        raise SystemExit("the hub did not start")
    return hub, words[4], words[6], token


async def inspect(client_address: str, session: dict[str, object]) -> None:
    host, port = client_address.rsplit(":", 1)
    client = await DapClient.connect(host, int(port))
    await client.initialize()
    stopped = await client.attach(str(session["id"]))
    thread_id = stopped.body["threadId"]
    frames = (await client.request("stackTrace", {"threadId": thread_id}))["stackFrames"]
    top = frames[0]
    scopes = (await client.request("scopes", {"frameId": top["id"]}))["scopes"]
    variables = (await client.request(
        "variables", {"variablesReference": scopes[0]["variablesReference"]}))["variables"]
    local_values = ", ".join(f"{v['name']}={v['value']}" for v in variables)
    console.print(f"  [bold]{session['id']}[/] pid {session['pid']}: stopped in "
                  f"{top['name']}() line {top['line']}; locals: {local_values}")
    evaluated = await client.request("evaluate", {"expression": "loss * 100",
                                                  "frameId": top["id"], "context": "repl"})
    console.print(f"    evaluate loss * 100 -> {evaluated['result']}; continuing")
    await client.request("continue", {"threadId": thread_id})
    await client.request("disconnect", {})
    await client.close()


def main() -> int:
    hub, client_address, worker_address, token = start_hub()
    workers: list[subprocess.Popen[str]] = []
    try:
        console.print(f"[green]hub[/] clients on {client_address}, workers dial {worker_address}")
        with tempfile.TemporaryDirectory() as folder:
            job = Path(folder) / "job.py"
            job.write_text(JOB)
            for rank in (0, 1):
                env = dict(os.environ, PYTHONBREAKPOINT="raydebug.set_trace",
                           RAYDEBUG_HUB=worker_address, RAYDEBUG_TOKEN=token,
                           RANK=str(rank), PYDEVD_DISABLE_FILE_VALIDATION="1",
                           RAYDEBUG_WAIT_TIMEOUT="60")
                workers.append(subprocess.Popen([sys.executable, str(job)], env=env,
                                                stdout=subprocess.PIPE,
                                                stderr=subprocess.DEVNULL, text=True))
            sessions = list_sessions(client_address, wait_for=2, timeout=60)
            console.print(views.sessions_table(sessions, width=console.width,
                                               hub=client_address))
            console.print("[green]debugging each session through the hub's one port[/]")
            for session in sessions:
                asyncio.run(inspect(client_address, session))
            for worker in workers:
                out, _ = worker.communicate(timeout=60)
                console.print(f"  worker {worker.pid} exited {worker.returncode}: {out.strip()}")
            ok = all(w.returncode == 0 for w in workers) and len(sessions) == 2
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
            worker.wait(timeout=30)
        hub.terminate()  # a clean exit: the hub removes its state file
        try:
            hub.wait(timeout=30)
        except subprocess.TimeoutExpired:
            hub.kill()
            hub.wait(timeout=30)
    console.print("[green]demo complete[/]" if ok else "[red]demo failed[/]")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
