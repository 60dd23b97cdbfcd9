"""Path translation between a process's code directory and the client's checkout (sans-IO).

Ray unpacks a job's ``working_dir`` on each node under a directory named after its content
hash (``.../working_dir_files/_ray_pkg_<hash>``), which changes with every submission, so a
debugpy ``pathMappings`` entry written for one job is stale for the next. Instead the client
names only its side, in its attach arguments (``"raydebug": {"localRoot": "/home/me/code"}``),
and the hub, which knows each session's ``remote_root``, rewrites paths on the DAP path:

- process -> client (responses, events): a path under ``remote_root`` becomes the same path
  under ``local_root`` (stack frames, sources, breakpoints, modules);
- client -> process (requests): a path under ``local_root`` becomes the path under
  ``remote_root`` (``setBreakpoints``, ``source``, ``breakpointLocations``...).

Every value of a ``"path"`` key is translated; paths elsewhere are left alone. A substring
search comes first, so messages that cannot contain a mapped path (most of them) pass as the
same bytes; in the others only the path values are decoded and re-encoded.
"""

from __future__ import annotations

import json
import ntpath
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from .messages import Message, Request

M = TypeVar("M", bound=Message)

_WINDOWS = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")
# A "path" key and its JSON string value (escapes included). An unescaped quote always ends a
# JSON string, so this cannot match inside another string.
_PATH_VALUE = re.compile(rb'"path"(\s*:\s*)"([^"\\]*(?:\\.[^"\\]*)*)"')


def _is_windows(path: str) -> bool:
    return bool(_WINDOWS.match(path))


def _needle(root: str) -> bytes | None:
    """The bytes ``root`` appears as in a JSON body, when they are certain (ASCII, nothing
    JSON escapes but the backslash); else None (then every message with a path is parsed)."""
    if not root.isascii() or '"' in root or any(ord(c) < 0x20 for c in root):
        return None
    return root.replace("\\", "\\\\").encode()


@dataclass(frozen=True)
class PathTranslator:
    """Maps paths under ``remote_root`` (on the process's node) to ``local_root`` (on the
    client's machine) and back. Either side may be POSIX or Windows."""

    remote_root: str
    local_root: str
    _remote_needle: bytes | None = field(init=False, repr=False, compare=False)
    _local_needle: bytes | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "remote_root", self._strip(self.remote_root))
        object.__setattr__(self, "local_root", self._strip(self.local_root))
        object.__setattr__(self, "_remote_needle", _needle(self.remote_root))
        object.__setattr__(self, "_local_needle", _needle(self.local_root))

    @staticmethod
    def _strip(root: str) -> str:
        stripped = root.rstrip("\\/")
        return stripped or root[:1]

    @classmethod
    def for_attach(cls, attach_arguments: dict[str, Any],
                   remote_root: str | None) -> PathTranslator | None:
        """The translator for a client that attached with ``attach_arguments`` to a session
        whose code lives in ``remote_root``; None when either side is not given (then
        nothing is translated)."""
        settings = attach_arguments.get("raydebug")
        local_root = settings.get("localRoot") if isinstance(settings, dict) else None
        if not (isinstance(local_root, str) and local_root and remote_root):
            return None
        return cls(remote_root=remote_root, local_root=local_root)

    # -- one path ----------------------------------------------------------------------------

    def to_local_path(self, path: str) -> str:
        """``path`` on the process's node as the client knows it (unchanged if elsewhere)."""
        return self._move(path, self.remote_root, self.local_root)

    def to_remote_path(self, path: str) -> str:
        """``path`` on the client's machine as the process knows it (unchanged if elsewhere)."""
        return self._move(path, self.local_root, self.remote_root)

    @staticmethod
    def _move(path: str, source: str, target: str) -> str:
        windows = _is_windows(source)
        key = path.lower() if windows else path
        root = source.lower() if windows else source
        if key == root:
            return target
        separators = "\\/" if windows else "/"
        if not (key.startswith(root) and len(key) > len(root) and key[len(root)] in separators):
            return path
        relative = path[len(source) + 1:]
        parts = re.split(r"[\\/]", relative) if windows else relative.split("/")
        join = ntpath.join if _is_windows(target) else posixpath.join
        return join(target, *parts)

    # -- message bodies ----------------------------------------------------------------------

    def to_local(self, body: bytes) -> bytes:
        """A message body from the process, with its paths as the client knows them."""
        return self._rewrite(body, self._remote_needle, self.to_local_path)

    def to_remote(self, body: bytes) -> bytes:
        """A message body from the client, with its paths as the process knows them."""
        return self._rewrite(body, self._local_needle, self.to_remote_path)

    def arguments_to_remote(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """A request's arguments (as a dict) with the client's paths as the process's."""
        return dict(_translate(arguments, self.to_remote_path)[0])

    def request_to_remote(self, message: M) -> M:
        """A client's message, parsed, with its paths as the process knows them (the same
        message when it names none under the local root)."""
        if not isinstance(message, Request) or not message.arguments:
            return message
        arguments, changed = _translate(message.arguments, self.to_remote_path)
        return replace(message, arguments=arguments, raw=None) if changed else message

    @staticmethod
    def _rewrite(body: bytes, needle: bytes | None, move: Callable[[str], str]) -> bytes:
        if b'"path"' not in body or (needle is not None and needle not in body):
            return body  # the fast path: nothing to translate
        changed = False

        def one(match: re.Match[bytes]) -> bytes:
            nonlocal changed
            raw = match.group(2)
            if needle is not None and not raw.startswith(needle):
                return match.group(0)  # not under the root: no need to decode it
            try:
                path = (json.loads(b'"' + raw + b'"') if b"\\" in raw
                        else raw.decode("utf-8"))
            except ValueError:
                return match.group(0)
            moved = move(path)
            if moved == path:
                return match.group(0)
            changed = True
            return b'"path"' + match.group(1) + json.dumps(moved).encode()

        # Only the values of "path" keys are decoded and re-encoded; the rest of the message
        # keeps its bytes (parsing and re-encoding a 20-frame stackTrace took ~0.2 ms).
        translated = _PATH_VALUE.sub(one, body)
        return translated if changed else body


def _translate(value: Any, move: Callable[[str], str]) -> tuple[Any, bool]:
    """``value`` with every string under a ``"path"`` key passed through ``move``; and
    whether anything changed."""
    if isinstance(value, dict):
        changed = False
        result: dict[str, Any] = {}
        for key, item in value.items():
            if key == "path" and isinstance(item, str):
                new = move(item)
                changed = changed or new != item
                result[key] = new
            else:
                result[key], item_changed = _translate(item, move)
                changed = changed or item_changed
        return result, changed
    if isinstance(value, list):
        items = [_translate(item, move) for item in value]
        return [item for item, _ in items], any(flag for _, flag in items)
    return value, False
