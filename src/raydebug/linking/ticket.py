"""The ticket: what a target needs to link (the hub's agent address, its token, the identity
to register), in a private directory the target's user alone can read, never on a command
line; and the bootstrap that reads it there.

A :class:`Ticket` is a directory made for one target (mode 0700, owned by the target's user
when the linker is root and the target another user): ``ticket.json`` (mode 0600, deleted
by the bootstrap as soon as it has read it), ``boot.py`` (:mod:`.bootstrap`'s source and the
call that runs it) and, once it has run, the bootstrap's ``result.json``. The linker removes
the directory when done (:meth:`Ticket.close`), whatever happened.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RaydebugError
from ..protocol.control import PROTOCOL_VERSION

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")


@dataclass(frozen=True)
class HubForAgents:
    """The hub as an agent dials it: ``host:port`` of its agent listener, its token, and
    with TLS the certificate's fingerprint."""

    address: str
    token: str
    cert: str | None = None


class Ticket:
    """One target's private directory (see the module docstring)."""

    def __init__(self, hub: HubForAgents, owner: int | None = None,
                 identity: dict[str, Any] | None = None,
                 jobs: list[str] | None = None) -> None:
        """Write the ticket and the bootstrap for a target run by uid ``owner`` (None: the
        linker's own user). ``jobs``: link the target only if it runs one of these Ray jobs
        (see :func:`.inside.link`)."""
        self.directory = Path(tempfile.mkdtemp(prefix="raydebug-link-"))
        self.ticket = self.directory / "ticket.json"
        self.boot = self.directory / "boot.py"
        self.result = self.directory / "result.json"
        self.handed_over = False
        body: dict[str, Any] = {"hub": hub.address, "token": hub.token, "cert": hub.cert,
                                "identity": identity or {}, "result": str(self.result),
                                "protocol": PROTOCOL_VERSION}
        if jobs is not None:
            body["jobs"] = jobs
        _write_private(self.ticket, json.dumps(body).encode())
        source = BOOTSTRAP.read_text(encoding="utf-8")
        _write_private(self.boot, f"{source}\n\n_link({str(self.ticket)!r})\n".encode())
        if owner is not None and owner != os.geteuid():
            for path in (self.directory, self.ticket, self.boot):
                os.chown(path, owner, -1)  # only root gets here: others were refused

    def injected_code(self) -> str:
        """The Python run in the target: exec ``boot.py`` in a namespace of its own (none of
        the target's modules is touched). Written without quotes and on one line, as gdb's
        command line and ``PyRun_SimpleString`` take it (the path as bytes, as debugpy does)."""
        path = list(str(self.boot).encode())
        return f"exec(open(bytes({path}).decode()).read(), dict())"

    def read_result(self) -> dict[str, Any] | None:
        """What the bootstrap said, or None when it has not run (or wrote nothing)."""
        try:
            answer = json.loads(self.result.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return answer if isinstance(answer, dict) else None

    def close(self) -> None:
        if not self.handed_over:
            shutil.rmtree(self.directory, ignore_errors=True)

    def hand_over(self) -> None:
        """Leave the directory to whoever removes it later (a call still waiting in the
        target reads it when it runs)."""
        self.handed_over = True

    def __enter__(self) -> Ticket:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _write_private(path: Path, data: bytes) -> None:
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        raise RaydebugError(f"cannot write the link's ticket {path}: {error.strerror}") from None
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
