"""Inside a target that ``raydebug link`` reached: start its live link to the hub the ticket
names, as ``RAYDEBUG_LIVE=1`` starts it at a process's start.

Called by :mod:`.bootstrap` on the thread gdb or ``sys.remote_exec`` runs it on (the main
thread, so raydebug's pause signal can be installed there), holding the GIL: it only starts
the link thread, which connects in the background.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def link(ticket: dict[str, Any]) -> dict[str, Any]:
    """Start the live link; returns ``{"status": "linked"}``, or ``"already"`` when this
    process is live already (under ``raydebug run``, or linked before: a no-op), ``"own"``
    when it runs raydebug's own command line (a hub: never a process to debug), ``"skipped"``
when the ticket names ``jobs`` and this process runs none of them (a Ray worker knows its
job only from inside: an idle one, or one of another job, is left alone). Raises
    :class:`~raydebug.errors.ConfigurationError` for a ticket that names no hub."""
    from ..agent import start_live_link
    from ..agent.config import AgentConfig
    from ..agent.link import live
    from ..agent.startup import is_raydebug_command

    if live.is_live():  # of another job: not "linked already" for a job it never ran
        return _of_another_job(ticket, _ray_job()) or {"status": "already"}
    if is_raydebug_command():
        return {"status": "own", "why": "it runs raydebug itself (a hub or a command)"}
    other = protocol_mismatch(ticket)
    if other is not None:
        return other
    settings = {**os.environ, "RAYDEBUG_HUB": str(ticket["hub"]),
                "RAYDEBUG_TOKEN": str(ticket["token"]),
                "RAYDEBUG_HUB_CERT": str(ticket.get("cert") or "")}
    config = AgentConfig.from_env(settings)  # the rest (wait timeout...) as the process says
    identity = dict(ticket.get("identity") or {})
    if "ray" in sys.modules:  # a Ray worker: what it runs now, its breakpoint() and children
        identity = _as_ray_process(identity)
    skipped = _of_another_job(ticket, identity.get("job_id"))
    if skipped is not None:
        return skipped
    start_live_link(identity, config=config, started=True)
    return {"status": "linked"}


def _of_another_job(ticket: dict[str, Any], job_id: str | None) -> dict[str, Any] | None:
    """``{"status": "skipped", ...}`` when the ticket names ``jobs`` (on a cluster: link only
    a process of one of these) and ``job_id`` is none of them, else None."""
    jobs = ticket.get("jobs")
    if jobs is not None and job_id not in jobs:
        return {"status": "skipped", "why": f"job {job_id or 'none'}"}
    return None


def _ray_job() -> str | None:
    """The Ray job this process runs now (None: not a Ray process, or it runs none)."""
    if "ray" not in sys.modules:
        return None
    try:
        from ..integrations.ray.metadata import live_identity

        return live_identity().get("job_id")
    except Exception:  # Ray's errors are many; a job unknown is no job
        return None


def protocol_mismatch(ticket: dict[str, Any]) -> dict[str, Any] | None:
    """``{"status": "protocol", ...}`` when the linker speaks another link protocol than
    this process's raydebug (its hub would refuse the link at the handshake, and the
    linker wait for nothing); None when they agree, or the ticket does not say."""
    from ..protocol.control import PROTOCOL_VERSION

    theirs = ticket.get("protocol")
    if theirs is None or theirs == PROTOCOL_VERSION:
        return None
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return {"status": "protocol", "why": f"its raydebug ({package}) speaks "
            f"link protocol {PROTOCOL_VERSION} and this raydebug {theirs}"}


def _as_ray_process(identity: dict[str, Any]) -> dict[str, Any]:
    """In a Ray worker or driver: hand the agent Ray's discovery (what a task runs now, for
    ``ps`` and ``stacks``) and the process's ids, as raydebug's setup hook would have."""
    try:
        from ..integrations.ray.link_jobs import as_ray_process
    except ImportError:  # ray is imported but not usable: linked without its ids
        return identity
    return {**as_ray_process(), **identity}
