"""What raydebug's tests and benchmarks share; not part of raydebug (not shipped, and no
module of ``src/`` imports it).

- ``processes``: a real hub subprocess (:class:`HubProcess`), debugged scripts, bounded waits;
- ``dap_cycles``: attach to a session through the hub, evaluate, continue, detach;
- ``ide``: a client that behaves like VS Code with a cluster session (child sessions);
- ``scripted_peer``: a cluster session's client, scripted, for tests in memory;
- ``pythons``: another interpreter's venv with this venv's debugpy.

Both ``tests/`` and ``bench/`` put the repository's root on ``sys.path`` to import it.
"""
