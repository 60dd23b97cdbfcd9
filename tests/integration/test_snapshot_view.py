"""A snapshot read as a session, through a real hub: a process under RAYDEBUG_SNAPSHOTS=1
fails at once, and after it has gone a DAP client and ``raydebug attach`` read its capture."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import TIMEOUT, HubProcess, finish, line_of, run, start_hub, write_script
from raydebug.client.dap import DapClient, DapRequestError

pytestmark = pytest.mark.integration

FAILING = """
def train(config, rows):
    total = sum(rows)
    raise ValueError(f"bad row total {total}")  # raised here


config = {"layers": [{"width": 8, "act": "relu"}, {"width": 4}], "lr": 0.1}
train(config, [1, 2, 3])
"""


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, Path, str]]:
    """A hub, the script that failed under it, and its snapshot's id (the process gone)."""
    script = write_script(tmp_path_factory.mktemp("snapshot"), "job.py", FAILING)
    hub = start_hub()
    try:
        code, _, err = finish(hub.spawn(script, RAYDEBUG_SNAPSHOTS="1"))
        assert code == 1 and "ValueError: bad row total 6" in err, err
        rows = hub.wait_listing("/api/snapshots", "the failure's snapshot",
                                lambda answer: answer["snapshots"])
        yield hub, script, rows[0]["id"]
    finally:
        hub.close()


def test_a_dap_client_reads_the_failure_as_a_stopped_session(failed):
    hub, script, snapshot_id = failed

    async def read() -> None:
        client = await hub.dap()
        stopped = await client.attach(snapshot_id)
        assert stopped.body["reason"] == "exception"
        thread = stopped.body["threadId"]
        info = await client.request("exceptionInfo", {"threadId": thread})
        assert (info["exceptionId"], info["description"]) == ("ValueError", "bad row total 6")
        frames = (await client.request("stackTrace", {"threadId": thread}))["stackFrames"]
        top = frames[0]
        assert (top["name"], top["line"]) == ("train", line_of(script, "raised here"))
        assert top["source"]["path"] == str(script)
        source = await client.request("source", {"source": top["source"],
                                                 "sourceReference": top["source"][
                                                     "sourceReference"]})
        assert source["content"] == script.read_text()

        scopes = (await client.request("scopes", {"frameId": top["id"]}))["scopes"]
        local = {v["name"]: v for v in await variables(client, scopes[0]["variablesReference"])}
        assert local["total"]["value"] == "6"
        # A dict local expanded two levels: config -> ['layers'] -> [0] -> its items.
        config = {v["name"]: v for v in await variables(client,
                                                           local["config"]["variablesReference"])}
        layers = await variables(client, config["['layers']"]["variablesReference"])
        assert [v["name"] for v in layers] == ["[0]", "[1]"]
        first = {v["name"]: v["value"] for v in await variables(
            client, layers[0]["variablesReference"])}
        assert first == {"['width']": "8", "['act']": "'relu'"}

        answer = await client.request("evaluate", {"expression": "config['layers'][0]['width']",
                                                   "frameId": top["id"], "context": "repl"})
        assert answer["result"] == "8"
        with pytest.raises(DapRequestError, match="a snapshot can only show captured values"):
            await client.request("evaluate", {"expression": "__import__('os').getpid()",
                                              "frameId": top["id"], "context": "repl"})
        with pytest.raises(DapRequestError, match=r"capture of one moment.*cannot step"):
            await client.request("next", {"threadId": thread})
        await client.request("disconnect", {})
        await client.close()

    run(read())
    # Read, the snapshot stays for the next reader.
    assert [row["id"] for row in hub.get("/api/snapshots")["snapshots"]] == [snapshot_id]


async def variables(client: Any, reference: int) -> list[dict[str, Any]]:
    answer = await client.request("variables", {"variablesReference": reference})
    return list(answer["variables"])


def test_raydebug_attach_is_a_read_only_pdb_on_it(failed):
    hub, script, snapshot_id = failed
    typed = ("where\np total\npp config\nl\nexceptions\np total, len(rows)\nup\n"
             "p config['lr']\nn\nq\n")
    result = subprocess.run(
        [sys.executable, "-m", "raydebug", "attach", snapshot_id[:6], "--hub",
         hub.client_address], input=typed, capture_output=True, text=True, timeout=TIMEOUT,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "160",
             "XDG_STATE_HOME": str(hub.state)})
    out = result.stdout
    assert result.returncode == 0, result.stderr + out
    raised = line_of(script, "raised here")
    assert f"snapshot {snapshot_id}: " in out and "failed: ValueError: bad row total 6" in out
    assert f"{script}({raised})train()" in out  # where
    assert "\n6\n" in out  # p total
    assert "{'layers': [{'act': 'relu', 'width': 8}, {'width': 4}], 'lr': 0.1}" in out  # pp
    assert f"{raised}  ->" in out or f"{raised} ->" in out  # l, from the captured text
    called = line_of(script, "train(config, [1, 2, 3])")
    assert (f"Traceback (most recent call last):\n  File \"{script}\", line {called}, in "
            f"<module>\n    train(config, [1, 2, 3])\n  File \"{script}\", line {raised}, in "
            "train\n") in out  # exceptions, oldest first
    assert "\n(6, 3)\n" in out  # p a, b: a tuple of captured values, as in pdb
    assert "<module>()" in out and "\n0.1\n" in out  # up, then p in that frame
    assert "cannot step, only show what was captured" in out  # n
    assert f"snapshot {snapshot_id} closed" in out


def test_raydebug_attach_waiting_for_a_breakpoint_names_the_kept_snapshots(failed):
    """Found by use: after a job failed under --snapshots, `raydebug attach` said only
    "waiting for a breakpoint...", which no failure already captured would end."""
    hub, _, snapshot_id = failed
    result = subprocess.run(
        [sys.executable, "-m", "raydebug", "attach", "--timeout", "1", "--hub",
         hub.client_address], input="", capture_output=True, text=True, timeout=TIMEOUT,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "160",
             "XDG_STATE_HOME": str(hub.state)})
    said = result.stdout + result.stderr
    assert "waiting for a breakpoint" in said, said
    assert re.search(rf"1 snapshot kept \(the newest {snapshot_id}: ValueError: bad row total "
                     rf"6\): `\S*raydebug attach {snapshot_id}` reads it, `\S*raydebug "
                     r"snapshots` lists them", said), said


def test_a_cluster_session_offers_it_as_a_child_only_when_asked(failed):
    hub, _, snapshot_id = failed

    async def cluster(settings: dict[str, Any]) -> DapClient:
        parent = await DapClient.connect(*hub.client)
        await parent.initialize(supportsStartDebuggingRequest=True)
        attach = parent.send_request("attach", {"name": "cluster", "raydebug": settings})
        await parent.wait_event("initialized")
        await parent.request("configurationDone")
        assert (await attach).success
        return parent

    async def offered() -> None:
        plain = await cluster({})
        asked = await cluster({"snapshots": True})
        offer = await asked.wait_reverse_request("startDebugging", 10)
        configuration = offer.arguments["configuration"]
        assert configuration["raydebug"]["session"] == snapshot_id
        assert configuration["name"].startswith("snapshot: job.py:")
        child = await DapClient.connect(*hub.client)
        await child.initialize()
        stopped = await child.attach(**{key: value for key, value in configuration.items()
                                        if key != "request"})
        asked.respond(offer)
        assert stopped.body["reason"] == "exception"
        await child.request("disconnect", {})
        # The parent that did not ask was offered nothing: a parent's offers come before
        # its attach's answer, which it has.
        assert not plain.reverse_requests
        for client in (child, asked, plain):
            await client.close()

    run(offered())


def test_a_group_session_shows_it_as_a_thread_only_when_asked(failed):
    hub, script, snapshot_id = failed

    async def group(settings: dict[str, Any]) -> DapClient:
        client = await DapClient.connect(*hub.client)
        await client.initialize(supportsStartDebuggingRequest=False)
        attach = client.send_request("attach", {"name": "group", "raydebug": {
            "group": True, **settings}})
        await client.wait_event("initialized")
        assert (await attach).success
        await client.request("configurationDone")
        return client

    async def shown() -> None:
        plain = await group({})
        await plain.wait_event("output", timeout=10)  # "no process ... yet": it looked
        assert (await plain.request("threads"))["threads"] == []
        asked = await group({"snapshots": True})
        stopped = await asked.wait_event("stopped", timeout=10)
        assert stopped.body["reason"] == "exception"
        [thread] = (await asked.request("threads"))["threads"]
        assert thread["id"] == stopped.body["threadId"]
        assert "snapshot [ValueError] · MainThread" in thread["name"]
        top = (await asked.request("stackTrace", {"threadId": thread["id"]}))["stackFrames"][0]
        assert (top["name"], top["line"]) == ("train", line_of(script, "raised here"))
        answer = await asked.request("evaluate", {"expression": "config['layers'][1]",
                                                  "frameId": top["id"], "context": "repl"})
        assert answer["result"] == "{'width': 4}"
        with pytest.raises(DapRequestError, match="cannot step"):
            await asked.request("next", {"threadId": thread["id"]})
        await asked.request("continue", {"threadId": thread["id"]})  # ends its view
        assert (await asked.request("threads"))["threads"] == []
        for client in (asked, plain):
            await client.request("disconnect", {})
            await client.close()

    run(shown())
    # Read, the snapshot stays for the next reader.
    assert [row["id"] for row in hub.get("/api/snapshots")["snapshots"]] == [snapshot_id]


def test_the_web_page_lists_it_exception_first_and_opens_it_read_only(failed):
    hub, _, snapshot_id = failed
    browser_module = pytest.importorskip("browser")
    pytest.importorskip("selenium")
    from selenium.webdriver.common.by import By

    with browser_module.chromium() as browser:
        wait_for = browser_module.wait_for
        browser.get(f"http://{hub.client_address}/#/")
        row = wait_for(browser, lambda: browser.find_element(
            By.CSS_SELECTOR, f"#snapshots-table tr[data-snapshot='{snapshot_id}']"), 30,
            "the snapshot's row")
        assert row.find_element(By.TAG_NAME, "th").text == "ValueError: bad row total 6"
        # (the list holds snapshot points too: it said only failures were captured)
        assert browser.find_element(By.CSS_SELECTOR, "#snapshots-section p").text.startswith(
            "Failures and snapshot points captured without pausing")
        row.find_element(By.TAG_NAME, "a").click()

        def state() -> str:
            return str(browser.find_element(By.ID, "debugger-state").text)

        wait_for(browser, lambda: state().startswith("snapshot (exception)"), 30, "opened")
        assert browser.find_element(By.ID, "exception-text").text == \
            "ValueError: bad row total 6"
        current = wait_for(browser, lambda: browser.find_element(
            By.CSS_SELECTOR, "#source li.current"), 30, "the raising line")
        assert "raise ValueError" in current.text
        for button in ("btn-continue", "btn-next", "btn-step-in", "btn-pause"):
            assert not browser.find_element(By.ID, button).is_enabled(), button
        browser.find_element(By.ID, "console-input").send_keys("config['layers'][0]['width']")
        browser.find_element(By.CSS_SELECTOR, "#console-form button").click()
        wait_for(browser, lambda: any(value.text == "8" for value in browser.find_elements(
            By.CSS_SELECTOR, "#console-log .result .value")), 30, "the console's answer")
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert not errors, errors


def test_a_hub_with_a_client_token_serves_it_only_with_the_token(failed, tmp_path: Path):
    hub, _, snapshot_id = failed
    # The same snapshot, kept by a hub that reads it back from its --snapshot-dir.
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / f"{snapshot_id}.json").write_text(json.dumps(
        hub.get(f"/api/snapshot?id={snapshot_id}")))
    guarded = start_hub("--client-token", "s3cret", "--snapshot-dir", str(kept))

    async def attach(raydebug: dict[str, Any]) -> str:
        client = await DapClient.connect(*guarded.client)
        await client.initialize()
        try:
            stopped = await client.attach(snapshot_id, raydebug=raydebug)
            return str(stopped.body["reason"])
        except DapRequestError as error:
            return str(error)
        finally:
            await client.close()

    try:
        assert "requires its client token" in run(attach({}))
        assert run(attach({"token": "s3cret"})) == "exception"
    finally:
        guarded.close()
