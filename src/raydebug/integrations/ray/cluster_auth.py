"""Ray's token authentication as a client of a cluster meets it: Ray's own token is used
when the cluster asks for one, without ``RAY_AUTH_MODE=token`` in every shell.

Theory of operation. Ray 2.60's ``ray start --head`` turns token authentication on when a
token exists (the first local ``ray.init()`` writes ``~/.ray/auth_token``), and a client is
then refused (``InvalidAuthToken``) unless ``RAY_AUTH_MODE=token`` is in its environment;
``ray.init()`` turns it on by itself only for a cluster it found without being given an
address. Here a client refused for want of a token turns token mode on, for itself and the
processes it starts, when ``RAY_AUTH_MODE`` is unset and Ray's token loader finds a token
where Ray looks for one (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``),
and :func:`gcs_client` tries once more. Anything else is one line that says where the
token goes. ``raydebug run`` asks before its driver starts
(:func:`.discovery.driver_environment`): Ray's driver, refused, would retry every second for
as long as it is let.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ...errors import HubUnreachableError

AUTH_MODE_VARIABLE = "RAY_AUTH_MODE"
TOKEN_PLACES = "~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN"
GCS_CONNECT_TIMEOUT = 10.0  # Ray's own GcsClient gives up only after 40 s


def gcs_client(gcs_address: str) -> Any:
    """A GcsClient connected to the GCS at ``gcs_address`` (which answers TCP), with Ray's
    token when the cluster asks for it; or the exception Ray raised for another reason (its
    RpcError...). Raises :class:`HubUnreachableError` when the cluster refuses us for its
    token (:func:`token_refused`) or does not answer within :data:`GCS_CONNECT_TIMEOUT`."""
    client = _connect(gcs_address)
    if isinstance(client, Exception) and asks_for_token(client):
        if not use_ray_token():
            raise token_refused(gcs_address)
        client = _connect(gcs_address)
        if isinstance(client, Exception) and asks_for_token(client):
            raise token_refused(gcs_address)
    return client


def _connect(gcs_address: str) -> Any:
    """A GcsClient connected to ``gcs_address``, or the exception Ray raised (its own
    AuthenticationError, RpcError, ...). What Ray's C++ writes to stderr meanwhile (a
    refusal for want of a token, its retries) is dropped: the caller says what happened, in
    one line. Raises :class:`HubUnreachableError` after :data:`GCS_CONNECT_TIMEOUT`; Ray's
    C++ goes on trying then, and its lines stay dropped (the CLI exits soon after)."""
    import ray

    result: list[Any] = []

    def connect() -> None:
        try:
            result.append(ray._raylet.GcsClient(address=gcs_address))  # type: ignore[attr-defined]
        except Exception as error:
            result.append(error)

    # GcsClient blocks in C++ and takes no timeout: wait for it on a thread, bounded.
    thread = threading.Thread(target=connect, name="raydebug-gcs-connect", daemon=True)
    with _stderr_dropped() as keep_dropped:
        thread.start()
        thread.join(GCS_CONNECT_TIMEOUT)
        if not result:
            keep_dropped()
    if not result:
        raise HubUnreachableError(
            f"the Ray cluster at {gcs_address} did not answer within "
            f"{GCS_CONNECT_TIMEOUT:g} s: its GCS process may be stopped or overloaded, or "
            "that port is not a Ray GCS's", address=gcs_address)
    return result[0]


@contextlib.contextmanager
def _stderr_dropped() -> Iterator[Callable[[], None]]:
    """File descriptor 2 on /dev/null meanwhile (C++ writes there, not to sys.stderr).
    Calling what it gives keeps it there afterwards, Python's ``sys.stderr`` moved to the
    terminal's stderr (a C++ thread that has not finished would write on)."""
    sys.stderr.flush()
    saved = os.dup(2)
    keep = []
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield lambda: keep.append(True)
    finally:
        if keep:
            sys.stderr = open(saved, "w", buffering=1, errors="backslashreplace")  # noqa: SIM115 (for the rest of the process)
        else:
            os.dup2(saved, 2)
            os.close(saved)


def asks_for_token(error: BaseException) -> bool:
    """Whether ``error``, met connecting to a GCS, is the cluster refusing a client that
    sent no token or the wrong one."""
    from ray.exceptions import AuthenticationError

    return isinstance(error, AuthenticationError) or "InvalidAuthToken" in str(error)


def use_ray_token() -> bool:
    """Turn Ray's token authentication on in this process (and so in the processes it
    starts) when ``RAY_AUTH_MODE`` is unset and Ray finds a token; return whether it did.
    An explicit ``RAY_AUTH_MODE`` is left as the user set it, as Ray does."""
    if AUTH_MODE_VARIABLE in os.environ:
        return False
    from ray._private.authentication.authentication_token_setup import _enable_token_auth
    from ray._raylet import AuthenticationTokenLoader  # type: ignore[attr-defined]

    loader = AuthenticationTokenLoader.instance()
    loader.reset_cache()  # a token written since this process last looked
    if not loader.has_token(ignore_auth_mode=True):
        return False
    _enable_token_auth()  # RAY_AUTH_MODE=token in os.environ, and Ray's config reloaded
    return True


def token_refused(gcs_address: str) -> HubUnreachableError:
    """The error for a cluster that refused us after :func:`use_ray_token` could not help:
    no token found, the wrong one, or ``RAY_AUTH_MODE`` set to something else."""
    mode = os.environ.get(AUTH_MODE_VARIABLE)
    if mode is None:
        why = f"no token was found ({TOKEN_PLACES}, as Ray's own clients look)"
    elif mode.lower() == "token":
        why = f"the token found ({TOKEN_PLACES}) is not this cluster's"
    else:
        why = f"{AUTH_MODE_VARIABLE}={mode} is set"
    return HubUnreachableError(
        f"the Ray cluster at {gcs_address} asks for its token and {why}: copy the token "
        "from the head node's ~/.ray/auth_token (`ray get-auth-token` there prints it)",
        address=gcs_address)
