"""raydebug inside Ray: the only module that imports ray.

Theory of operation.

- **Enabling** adds two things to a job's ``runtime_env`` and keeps everything the user put
  there: a ``worker_process_setup_hook`` that runs in every worker after Ray's own set-up
  (which points ``PYTHONBREAKPOINT`` at Ray's debugger), and env vars. Three ways, all the
  same underneath: :func:`runtime_env` for code, :func:`runtime_env_hook` for
  ``RAY_RUNTIME_ENV_HOOK`` (used by ``raydebug run``), and ``ray job submit -- raydebug run``.
- **In a worker**, :func:`setup_worker` makes ``breakpoint()`` call raydebug, and replaces
  Ray's post-mortem entry points (``ray.util.pdb._is_ray_debugger_post_mortem_enabled`` /
  ``_post_mortem``, which Ray's task executor calls on a task or actor exception) so that a
  failing task freezes as a raydebug session when ``RAYDEBUG_POST_MORTEM=1`` or
  ``RAY_DEBUG_POST_MORTEM=1``.
- **Discovery**: a hub publishes its addresses and token in the GCS internal KV (namespace
  ``raydebug``). A worker that pauses reads them; if no hub is published it asks Ray for the
  named detached actor ``raydebug_hub`` on the head node with ``get_if_exists``, which GCS
  creates exactly once however many workers ask at the same moment. A hub started by hand
  (``raydebug hub --ray-address``) publishes over it and so takes precedence.
- **Children of a task** (a ``multiprocessing`` fork, a DataLoader worker, a
  ``subprocess``) cannot ask Ray: a fork child inherits a Ray connection that does not work
  after ``fork()``, and a new interpreter has none. So just before a worker starts a process
  (:func:`prepare_children`, from an at-fork hook and around ``fork_exec``), it looks the
  hub up (starting it if need be) and puts in its environment what the child needs:
  ``RAYDEBUG_CLUSTER_HUB``, ``RAYDEBUG_TOKEN_FILE`` (a 0600 file: the token itself would
  show in ``ps e`` and in logs that print the environment), ``RAYDEBUG_HUB_CERT`` with TLS,
  and ``RAYDEBUG_RAY_TASK``: the identities of the task that started it, which the child's
  sessions carry. ``PYTHONBREAKPOINT`` already names raydebug; an interpreter without
  raydebug only warns at ``breakpoint()``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from types import FrameType
from typing import Any

import ray

from .. import state_file
from ..errors import HubUnreachableError

KV_NAMESPACE = b"raydebug"
KV_HUB_KEY = b"hub"
HUB_ACTOR_NAME = "raydebug_hub"
HUB_ACTOR_NAMESPACE = "raydebug"
HEAD_NODE_RESOURCE = "node:__internal_head__"
SETUP_HOOK = "raydebug.integrations.ray.setup_worker"
DEFAULT_CLIENT_PORT = 5678
HUB_START_TIMEOUT = 60.0
# How often the hub actor asks the GCS whether its node is draining (ray stop, SIGTERM to
# `ray start --block`): the node waits for every lease to be returned, for up to 30 s.
DRAIN_POLL_INTERVAL = 1.0
TRUTHY = ("1", "true", "yes", "on")


# -- enabling ---------------------------------------------------------------------------------

def runtime_env(base: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return ``base`` (a runtime_env, possibly None) with raydebug enabled in every worker.

    The user's env_vars, working_dir, pip, and setup hook are kept; a setup hook of theirs
    runs first, then raydebug's. Called in a driver, it also routes the driver's own
    ``breakpoint()`` (see :func:`install_driver_hook`).
    """
    env = dict(base or {})
    env_vars = {str(k): str(v) for k, v in (env.get("env_vars") or {}).items()}
    for name in ("RAYDEBUG_POST_MORTEM", "RAYDEBUG_WAIT_TIMEOUT", "RAYDEBUG_HUB",
                 "RAYDEBUG_TOKEN", "RAYDEBUG_TOKEN_FILE", "RAYDEBUG_HUB_CERT",
                 "RAYDEBUG_HUB_TLS", "RAYDEBUG_LABELS"):
        if name in os.environ:
            env_vars.setdefault(name, os.environ[name])
    env["env_vars"] = env_vars
    user_hook = env.get("worker_process_setup_hook")
    if user_hook is None or user_hook == SETUP_HOOK:
        env["worker_process_setup_hook"] = SETUP_HOOK
    elif not isinstance(user_hook, ChainedSetupHook):
        env["worker_process_setup_hook"] = ChainedSetupHook(user_hook)
    install_driver_hook()
    return env


def runtime_env_hook(base: dict[str, Any] | None) -> dict[str, Any]:
    """``RAY_RUNTIME_ENV_HOOK`` target: Ray passes the driver's runtime_env through it."""
    return runtime_env(base)


class ChainedSetupHook:
    """The user's worker setup hook (a callable or a ``module.function`` name), then ours."""

    def __init__(self, user_hook: Any) -> None:
        self.user_hook = user_hook

    def __call__(self) -> None:
        hook = self.user_hook
        if isinstance(hook, str):
            module_name, _, function = hook.rpartition(".")
            hook = getattr(__import__(module_name, fromlist=[function]), function)
        hook()
        setup_worker()


# -- inside workers ---------------------------------------------------------------------------

def setup_worker() -> None:
    """Worker setup hook: breakpoint() and post-mortem go to raydebug, in this worker and
    in the processes it starts."""
    from .. import set_trace

    sys.breakpointhook = set_trace
    os.environ["PYTHONBREAKPOINT"] = "raydebug.set_trace"  # for processes this one starts
    # Inherited when `raydebug run`'s driver started the cluster; its children are no drivers.
    os.environ.pop("RAYDEBUG_RAY_DRIVER", None)
    ray_pdb = ray.util.pdb
    ray_pdb._is_ray_debugger_post_mortem_enabled = post_mortem_enabled
    ray_pdb._post_mortem = post_mortem
    watch_children()


def post_mortem_enabled() -> bool:
    return any(os.environ.get(name, "").lower() in TRUTHY
               for name in ("RAYDEBUG_POST_MORTEM", "RAY_DEBUG_POST_MORTEM"))


def post_mortem() -> None:
    """Called by Ray inside its handler of a task's exception: freeze in the raising frame.
    The task's error still reaches the caller once the session ends."""
    from .. import post_mortem as freeze

    freeze()


# -- children of a task -----------------------------------------------------------------------

CLUSTER_HUB_VARIABLE = "RAYDEBUG_CLUSTER_HUB"
TOKEN_FILE_VARIABLE = "RAYDEBUG_TOKEN_FILE"
CERT_VARIABLE = "RAYDEBUG_HUB_CERT"
TASK_VARIABLE = "RAYDEBUG_RAY_TASK"
CHILD_VARIABLES = (CLUSTER_HUB_VARIABLE, TOKEN_FILE_VARIABLE, CERT_VARIABLE, TASK_VARIABLE)
RETRY_HUB_AFTER = 10.0  # seconds before a worker that could not find the hub asks again

_ray_usable = True  # False in a fork child: the inherited Ray connection does not work
_watching = False
_hub_failed_at: float | None = None
_token_files: dict[str, str] = {}  # token -> the file this process wrote it to


def _forget_ray() -> None:
    global _ray_usable
    _ray_usable = False


os.register_at_fork(after_in_child=_forget_ray)


def watch_children() -> None:
    """Call :func:`prepare_children` before every process this worker starts: at
    ``os.fork()`` (multiprocessing, DataLoader workers) and in ``fork_exec`` (``subprocess``,
    multiprocessing's spawn). Installing twice changes nothing."""
    global _watching
    if _watching:
        return
    _watching = True
    os.register_at_fork(before=prepare_children)
    import _posixsubprocess

    _posixsubprocess.fork_exec = _preparing(_posixsubprocess.fork_exec)
    if hasattr(subprocess, "_fork_exec"):  # Python >= 3.11 binds it at import
        subprocess._fork_exec = _preparing(subprocess._fork_exec)


def _preparing(fork_exec: Any) -> Any:
    """``fork_exec`` that first calls :func:`prepare_children`. An ``env`` given to the call
    (argument 6 in every Python we support) that carries raydebug's variables gets their
    current values: it was copied from ``os.environ`` when they may have been older."""

    def fork_exec_for_a_task(*args: Any) -> Any:
        prepare_children()
        if len(args) > 5 and args[5] is not None:
            args = (*args[:5], _refreshed(args[5]), *args[6:])
        return fork_exec(*args)

    fork_exec_for_a_task.raydebug = True  # type: ignore[attr-defined]
    return fork_exec_for_a_task


def _refreshed(env_list: Any) -> Any:
    prefixes = tuple(f"{name}=".encode() for name in CHILD_VARIABLES)
    if not any(bytes(entry).startswith(prefixes) for entry in env_list):
        return env_list  # an environment of the caller's own making: theirs to decide
    kept = [entry for entry in env_list if not bytes(entry).startswith(prefixes)]
    return kept + [f"{name}={os.environ[name]}".encode()
                   for name in CHILD_VARIABLES if name in os.environ]


def prepare_children() -> None:
    """Put in ``os.environ`` what a process this worker is about to start needs to pause as
    a session of its own (see the module docstring). Never raises: a failure here must not
    stop the child from starting; its ``breakpoint()`` says what is missing."""
    global _hub_failed_at
    if not _ray_usable or not ray.is_initialized():
        return  # a fork child passes on what it inherited
    try:
        if ray.get_runtime_context().get_actor_name() == HUB_ACTOR_NAME:
            return  # the hub actor (it inherits a job's setup hook) must not wait for itself
        os.environ[TASK_VARIABLE] = json.dumps(
            {**session_fields(), "parent_pid": os.getpid()})
        if os.environ.get("RAYDEBUG_HUB"):
            return  # an explicit hub: the children inherit its variables as they are
        if _hub_failed_at is not None and time.monotonic() - _hub_failed_at < RETRY_HUB_AFTER:
            return
        info = find_or_start_hub()
        os.environ[CLUSTER_HUB_VARIABLE] = info.worker
        os.environ[TOKEN_FILE_VARIABLE] = _token_file(info.token)
        if info.cert:
            os.environ[CERT_VARIABLE] = info.cert
        else:
            os.environ.pop(CERT_VARIABLE, None)
        _hub_failed_at = None
    except Exception as error:  # Ray's errors are many; the child must still start
        _hub_failed_at = time.monotonic()
        from ..agent.report import say

        say(f"processes started by this task will not reach the hub: {error}")


def _token_file(token: str) -> str:
    """A 0600 file in the user's raydebug state directory holding ``token``; one per hub."""
    path = _token_files.get(token)
    if path is None:
        name = "hub-token-" + hashlib.sha256(token.encode()).hexdigest()[:16]
        target = state_file.directory() / name
        if not target.exists():
            state_file.write_private(target, token.encode())
        path = _token_files[token] = str(target)
    return path


# -- the driver -------------------------------------------------------------------------------

def install_driver_hook() -> None:
    """Route the driver's ``breakpoint()`` (see :func:`raydebug.agent.driver_breakpoint`).
    Ray only sets ``PYTHONBREAKPOINT``, which a replaced ``sys.breakpointhook`` ignores."""
    from ..agent import driver_breakpoint

    sys.breakpointhook = driver_breakpoint


# -- discovery --------------------------------------------------------------------------------

@dataclass(frozen=True)
class HubInfo:
    """What the KV says about the cluster's hub."""

    worker: str  # host:port workers dial
    client: str  # host:port (on the hub's node) for DAP and HTTP clients
    token: str
    owner: str  # "actor" or "cli"
    node_ip: str
    pid: int
    cert: str = ""  # with TLS: the fingerprint of the worker listener's certificate

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> HubInfo:
        """Raises ValueError or TypeError when ``data`` is not a HubInfo."""
        return cls(**json.loads(data))


def read_hub_info() -> HubInfo | None:
    from ray.experimental import internal_kv

    data = internal_kv._internal_kv_get(KV_HUB_KEY, namespace=KV_NAMESPACE)
    if not data:
        return None
    try:
        return HubInfo.from_json(data)
    except (ValueError, TypeError):
        return None


def wait_hub_info(timeout: float) -> HubInfo | None:
    """:func:`read_hub_info`, waiting up to ``timeout`` s for a hub to be published.

    The KV offers no notification, so this polls it (every 0.2 s), bounded by ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        info = read_hub_info()
        if info is not None or time.monotonic() >= deadline:
            return info
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def publish_hub_info(info: HubInfo) -> None:
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(KV_HUB_KEY, info.to_json(), overwrite=True,
                                 namespace=KV_NAMESPACE)


def unpublish_hub_info(info: HubInfo) -> None:
    """Remove the KV entry if it still describes ``info`` (a later hub may have replaced it)."""
    from ray.experimental import internal_kv

    if read_hub_info() == info:
        internal_kv._internal_kv_del(KV_HUB_KEY, namespace=KV_NAMESPACE)


def find_or_start_hub(stale: object = None) -> HubInfo:
    """The cluster's hub: the published one, or the detached actor, started once.

    ``stale`` is a HubInfo we could not connect to: if the KV still names it, it is
    forgotten and the actor asked for (a dead detached actor's name is free again, so a
    new one starts). Raises :class:`HubUnreachableError` when Ray cannot start it.
    """
    info = read_hub_info()
    if info is not None and info == stale and info.owner == "actor" and not _hub_actor_alive():
        unpublish_hub_info(info)
        info = None
    if info is not None:
        return info
    try:
        actor = hub_actor_class().options(
            name=HUB_ACTOR_NAME, namespace=HUB_ACTOR_NAMESPACE, lifetime="detached",
            get_if_exists=True, num_cpus=0, resources={HEAD_NODE_RESOURCE: 0.001},
        ).remote()
        data = ray.get(actor.start.remote(tls=hub_tls_wanted()), timeout=HUB_START_TIMEOUT)
    except Exception as error:  # Ray's errors are many; the user needs one line
        raise HubUnreachableError(f"could not start the raydebug hub actor: {error}") from None
    return HubInfo(**data)


def hub_tls_wanted() -> bool:
    """``RAYDEBUG_HUB_TLS=1`` (in the job's environment): the hub actor, if this process
    starts it, serves workers over TLS; they pin its certificate through the KV."""
    return os.environ.get("RAYDEBUG_HUB_TLS", "").strip().lower() in TRUTHY


def _hub_actor_alive() -> bool:
    try:
        ray.get_actor(HUB_ACTOR_NAME, namespace=HUB_ACTOR_NAMESPACE)
    except ValueError:
        return False
    return True


GCS_CONNECT_TIMEOUT = 10.0  # Ray's own GcsClient gives up only after 40 s


def find_gcs_address(address: str | None) -> str:
    """The GCS address (``host:port``) of the cluster that ``address`` names: a GCS
    address, or ``auto``/None for ``RAY_ADDRESS`` (unless it is a dashboard or Ray Client
    URL), else one running on this machine: the latest ``ray start`` if it answers, else
    the only GCS that answers. Raises :class:`HubUnreachableError` saying
    why (none found, or several and no way to choose).

    Unlike Ray's ``canonicalize_bootstrap_address``, a loopback address stays loopback: a
    cluster on 127.0.0.1 does not listen on the machine's network address.
    """
    from ray._private.services import find_bootstrap_address, find_gcs_addresses

    if address and address != "auto":
        if "://" in address:
            raise HubUnreachableError(
                f"{address} is not a Ray GCS address (HOST:PORT, e.g. 127.0.0.1:6379); a "
                "dashboard (http://) or Ray Client (ray://) address cannot be used")
        return address
    variable = os.environ.get("RAY_ADDRESS", "")
    if variable and "://" not in variable and variable != "auto":
        return variable
    try:
        latest = find_bootstrap_address(None)
        running = sorted(find_gcs_addresses())
    except Exception as error:  # reading /tmp/ray or the process table failed
        raise HubUnreachableError(f"cannot look for a local Ray cluster: {error}") from None
    if latest and _answers(latest):
        return str(latest)
    answering = [found for found in running if _answers(found)]
    if not answering:
        raise HubUnreachableError("no Ray cluster found on this machine")
    if len(answering) > 1:
        raise HubUnreachableError(
            f"{len(answering)} Ray clusters run on this machine ({', '.join(answering)}): "
            "choose one with --ray-address or RAY_ADDRESS")
    return str(answering[0])


def _answers(address: str, timeout: float = 3.0) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (within ``timeout``)."""
    try:
        _probe(address, timeout)
    except (OSError, ValueError):
        return False
    return True


def _probe(address: str, timeout: float) -> None:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
        pass


def connect_kv(address: str | None) -> str:
    """Reach the cluster's KV from a process that is not a Ray driver (the CLI); return the
    GCS address used (see :func:`find_gcs_address`).

    Bounded: a port that does not answer is refused within 3 s, a GCS that does not
    finish the handshake within :data:`GCS_CONNECT_TIMEOUT`. Raises
    :class:`HubUnreachableError` saying why.
    """
    from ray.experimental import internal_kv

    if ray.is_initialized() or internal_kv._internal_kv_initialized():
        return address or "auto"
    gcs_address = find_gcs_address(address)
    try:
        _probe(gcs_address, timeout=3.0)
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        raise HubUnreachableError(
            f"no Ray cluster answers at {gcs_address} ({reason.lower()})") from None
    result: list[Any] = []

    def connect() -> None:
        try:
            result.append(ray._raylet.GcsClient(address=gcs_address))  # type: ignore[attr-defined]
        except Exception as error:  # Ray raises its own AuthenticationError, RpcError, ...
            result.append(error)

    # GcsClient blocks in C++ and takes no timeout: wait for it on a thread, bounded.
    thread = threading.Thread(target=connect, name="raydebug-gcs-connect", daemon=True)
    thread.start()
    thread.join(GCS_CONNECT_TIMEOUT)
    if not result:
        raise HubUnreachableError(
            f"the Ray cluster at {gcs_address} did not answer within "
            f"{GCS_CONNECT_TIMEOUT:g} s (is it a Ray GCS port? does it use token "
            "authentication, RAY_AUTH_MODE=token?)")
    if isinstance(result[0], Exception):
        failure = str(result[0])
        if "auth" in failure.lower():
            raise HubUnreachableError(
                f"the Ray cluster at {gcs_address} uses token authentication: set "
                "RAY_AUTH_MODE=token (its token in ~/.ray/auth_token or RAY_AUTH_TOKEN)")
        first_line = failure.splitlines()[0][:200] if failure else type(result[0]).__name__
        raise HubUnreachableError(
            f"cannot read the Ray cluster's KV at {gcs_address}: {first_line}")
    internal_kv._initialize_internal_kv(result[0])
    return gcs_address


def find_or_start_cluster_hub(address: str | None) -> tuple[HubInfo, str]:
    """For the CLI: the hub of the cluster ``address`` names, started (as the first pause
    would start it) when it has none yet; and the GCS address. Starting it connects to the
    cluster as a short-lived driver, which needs this machine to be one of its nodes.
    Raises :class:`HubUnreachableError` saying why."""
    import logging

    gcs_address = connect_kv(address)
    info = read_hub_info()
    if info is not None:
        return info, gcs_address
    loopback = gcs_address.startswith(("127.", "localhost", "[::1]"))
    try:
        ray.init(address=gcs_address, namespace=HUB_ACTOR_NAMESPACE, log_to_driver=False,
                 logging_level=logging.WARNING,
                 _node_ip_address="127.0.0.1" if loopback else None)
    except Exception as error:
        first_line = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        raise HubUnreachableError(
            f"the Ray cluster at {gcs_address} has no raydebug hub yet, and this machine "
            f"cannot start it ({first_line}); run `raydebug hub --ray-address "
            f"{gcs_address}` on a node of the cluster, or wait for the first breakpoint"
        ) from None
    try:
        return find_or_start_hub(), gcs_address
    finally:
        ray.shutdown()


def publish_cli_hub(client: str, worker: str, token: str, cert: str | None = None) -> HubInfo:
    """Publish a hub started by ``raydebug hub --ray-address``: it replaces any other.
    ``cert``: its certificate's fingerprint, which workers then pin (``--tls``)."""
    info = HubInfo(worker=worker, client=client, token=token, owner="cli",
                   node_ip=worker.rsplit(":", 1)[0], pid=os.getpid(), cert=cert or "")
    publish_hub_info(info)
    return info


def local_node_ip() -> str:
    """This machine's address as Ray sees it (loopback when Ray is told to use it)."""
    from ray._private.services import get_node_ip_address

    return str(get_node_ip_address())  # type: ignore[no-untyped-call]


def node_ip() -> str:
    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


_actor_class: Any = None


def hub_actor_class() -> Any:
    global _actor_class
    if _actor_class is None:
        _actor_class = ray.remote(_HubActor)
    return _actor_class


class _HubActor:
    """The hub, as a detached async actor on the head node (no CPU reserved).

    A detached actor holds its worker lease forever, and a node being stopped (``ray stop``,
    SIGTERM to ``ray start --block``) waits up to 30 s for every lease to be returned
    before it gives up and kills its processes. So the actor watches its node's drain state
    and, once the node drains, stops serving, unpublishes itself and exits.
    """

    def __init__(self) -> None:
        self._info: HubInfo | None = None
        self._lock = asyncio.Lock()
        self._hub: Any = None
        self._serving: Any = None
        self._watching: Any = None

    async def start(self, tls: bool = False) -> dict[str, Any]:
        """Start serving once; return the HubInfo as a dict (every caller gets the same).

        The first call decides ``tls`` (the worker listener over TLS, its certificate's
        fingerprint in the HubInfo). Publishes it again on every call: a hub started by
        hand may have replaced it in the KV and gone since, and whoever calls found the KV
        empty.
        """
        async with self._lock:
            if self._info is None:
                self._info = await self._start(tls)
            publish_hub_info(self._info)
        return asdict(self._info)

    async def _start(self, tls: bool) -> HubInfo:
        from ..hub import Hub, HubConfig

        ip = node_ip()
        for port in (DEFAULT_CLIENT_PORT, 0):  # 5678, or any port when it is taken
            hub = Hub(HubConfig(port=port, worker_host=ip, worker_port=0, tls=tls))
            try:
                await hub.start()
                break
            except OSError:
                await hub.close()
        self._hub = hub
        self._serving = asyncio.ensure_future(hub.serve_forever())
        self._watching = asyncio.ensure_future(self._exit_when_node_drains())
        return HubInfo(worker="{}:{}".format(*hub.worker_address),
                       client="{}:{}".format(*hub.client_address),
                       token=hub.config.token, owner="actor", node_ip=ip, pid=os.getpid(),
                       cert=hub.certificate.fingerprint if hub.certificate else "")

    async def _exit_when_node_drains(self) -> None:
        """Poll the GCS (it has no notification for this) until this node is draining, then
        ask this actor to :meth:`stop` (an actor exits only from one of its own methods)."""
        node_id = ray.get_runtime_context().get_node_id()
        gcs = ray._private.worker.global_worker.gcs_client  # type: ignore[attr-defined]
        while True:
            await asyncio.sleep(DRAIN_POLL_INTERVAL)
            try:
                draining = await asyncio.to_thread(gcs.get_draining_nodes, timeout=5)
            except Exception:  # a GCS that is restarting or gone: try again
                continue
            if node_id in draining:
                break
        ray.get_runtime_context().current_actor.stop.remote()

    async def stop(self) -> None:
        """Stop serving, take the hub out of the KV, and end this actor."""
        if self._hub is not None:
            self._serving.cancel()
            await self._hub.close()
        if self._info is not None:
            try:
                unpublish_hub_info(self._info)
            except Exception:  # the GCS may already be going away; the node is stopping
                pass
        ray.actor.exit_actor()


# -- session metadata -------------------------------------------------------------------------

def in_ray_worker() -> bool:
    """A Ray worker or driver whose connection to Ray works (not a fork child of one)."""
    return _ray_usable and bool(ray.is_initialized())


def session_fields(frame: FrameType | None = None) -> dict[str, Any]:
    """Ray's identities of the current task, for the session record (None where n/a)."""
    context = ray.get_runtime_context()
    worker = ray._private.worker.global_worker
    task_id = _safe(context.get_task_id)
    fields: dict[str, Any] = {
        "job_id": _safe(context.get_job_id),
        "task_id": task_id,
        "task_name": _safe(context.get_task_name),
        "actor_id": _safe(context.get_actor_id),
        "actor_class": None,
        "node_id": _safe(context.get_node_id),
        "node_ip": _safe(node_ip),
        "worker_id": _safe(context.get_worker_id),
        "attempt": _safe(worker.core_worker.get_current_task_attempt_number)  # type: ignore[attr-defined]
        if task_id is not None else None,
        "remote_root": working_dir_root(),
    }
    if fields["actor_id"] and fields["task_name"] and "." in fields["task_name"]:
        fields["actor_class"] = fields["task_name"].split(".", 1)[0]
    return fields


def working_dir_root() -> str | None:
    """Where Ray unpacked the job's ``working_dir`` on this node, if the worker runs in it:
    the remote side of a path mapping to the user's local checkout."""
    cwd = os.getcwd()
    marker = os.sep + "working_dir_files" + os.sep
    if marker in cwd + os.sep:
        return cwd
    return None


def _safe(getter: Any) -> Any:
    try:
        value = getter()
    except Exception:
        return None
    return None if value in ("", "nil") else value
