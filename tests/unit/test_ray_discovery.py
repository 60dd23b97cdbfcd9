"""How the CLI finds a Ray cluster on this machine: bounded, loopback kept, and an error that
says why when it cannot choose."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

pytest.importorskip("ray")

from ray._private import services

from raydebug.errors import HubUnreachableError
from raydebug.integrations.ray import find_gcs_address


@pytest.fixture
def listening() -> Iterator[list[str]]:
    """Two loopback addresses that accept connections (stand-ins for GCS ports)."""
    sockets = []
    for _ in range(2):
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        sockets.append(server)
    yield [f"127.0.0.1:{s.getsockname()[1]}" for s in sockets]
    for server in sockets:
        server.close()


@pytest.fixture
def closed() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def machine(monkeypatch: pytest.MonkeyPatch, latest: str | None, running: list[str]) -> None:
    """This machine's Ray: the latest `ray start` (its address file) and the GCS processes."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(services, "find_bootstrap_address", lambda temp_dir: latest)
    monkeypatch.setattr(services, "find_gcs_addresses", lambda: frozenset(running))


def test_the_latest_ray_start_wins_and_loopback_stays_loopback(monkeypatch, listening):
    machine(monkeypatch, listening[0], listening)
    assert find_gcs_address(None) == listening[0]
    assert find_gcs_address("127.0.0.1:6379") == "127.0.0.1:6379"  # not the network address


def test_two_clusters_and_no_way_to_choose_is_an_error_that_names_them(monkeypatch, listening,
                                                                       closed):
    machine(monkeypatch, closed, listening)  # the latest is gone: two others answer
    with pytest.raises(HubUnreachableError, match="2 Ray clusters run on this machine") as info:
        find_gcs_address("auto")
    assert all(address in str(info.value) for address in listening)
    assert "--ray-address or RAY_ADDRESS" in str(info.value)


def test_a_stale_address_file_is_passed_over(monkeypatch, listening, closed):
    machine(monkeypatch, closed, [closed, listening[1]])
    assert find_gcs_address(None) == listening[1]
    machine(monkeypatch, closed, [closed])
    with pytest.raises(HubUnreachableError, match="no Ray cluster found on this machine"):
        find_gcs_address(None)


def test_ray_address_is_used_unless_it_is_a_url(monkeypatch, listening):
    machine(monkeypatch, listening[0], listening)
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert find_gcs_address("auto") == "10.1.2.3:6379"
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")  # set for `ray job submit`
    assert find_gcs_address("auto") == listening[0]
    with pytest.raises(HubUnreachableError, match="is not a Ray GCS address"):
        find_gcs_address("ray://head:10001")


def test_a_command_among_several_clusters_names_them_rather_than_guess(monkeypatch, listening,
                                                                      closed, tmp_path):
    """`raydebug list` (no --hub, no RAY_ADDRESS, no hub started here) where two clusters run
    and neither is the latest `ray start`: it says so, not that none was found, and does not
    talk to whatever hub answers at the default address."""
    from raydebug.cli.locate import locate_hub

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # no `raydebug hub` on this machine
    machine(monkeypatch, closed, listening)
    with pytest.raises(HubUnreachableError, match="2 Ray clusters run on this machine"):
        locate_hub(None, None, start=False)
    machine(monkeypatch, closed, [closed])
    assert locate_hub(None, None, start=False).is_default


def test_link_with_no_pid_terms_links_on_the_cluster_running_here(monkeypatch, listening,
                                                                  closed, tmp_path):
    """`raydebug link` and `raydebug link job=...` without --ray-address, as `ps` finds the
    cluster: on the one running here, not "without a Ray cluster, link takes pid=N terms"."""
    from click.testing import CliRunner

    from raydebug.cli import link_command
    from raydebug.integrations.ray import link_jobs

    asked: list[tuple[str | None, list[tuple[str, str]]]] = []

    def link_cluster(address, terms, token, timeout, say):  # its tasks: test_link_ray.py
        asked.append((address, terms))
        return [], "127.0.0.1:5678", []

    monkeypatch.setattr(link_jobs, "link_cluster", link_cluster)
    machine(monkeypatch, listening[1], listening)
    assert CliRunner().invoke(link_command.link, []).exit_code == 1  # no job runs there
    CliRunner().invoke(link_command.link, ["job=02000000"])
    assert asked == [(listening[1], []), (listening[1], [("job", "02000000")])]

    machine(monkeypatch, closed, listening)
    several = CliRunner().invoke(link_command.link, ["job=02000000"])
    assert "2 Ray clusters run on this machine" in str(several.exception)
