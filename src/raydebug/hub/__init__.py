"""The hub: an asyncio server on the head node that lists sessions and routes debuggers."""

from .server import Hub, HubConfig

__all__ = ["Hub", "HubConfig"]
