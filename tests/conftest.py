from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from helpers import HubProcess, start_hub


@pytest.fixture
def hub() -> Iterator[HubProcess]:
    """A real hub subprocess; every process spawned through it is stopped afterwards."""
    process = start_hub()
    try:
        yield process
    finally:
        process.close()
