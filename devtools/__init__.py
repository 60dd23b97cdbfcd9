"""What raydebug's tests and benchmarks share; not part of raydebug (not shipped, and no
module of ``src/`` imports it).

- ``processes``: a real hub subprocess (:class:`HubProcess`), debugged scripts, the
  `raydebug` CLI run against a hub, bounded waits (the hub's long-poll where it has one);
- ``dap_cycles``: attach to a session through the hub, evaluate, continue, detach; a
  suspended thread's top frame and locals;
- ``ide``: a client that behaves like VS Code with a cluster session (child sessions);
- ``scripted_peer``: a cluster session's client, scripted, for tests in memory;
- ``pythons``: the other Pythons the tests run on, each in a venv with this venv's debugpy;
- ``terminal``: `raydebug attach` and other commands on a real pseudo-terminal;
- ``stacks``: ``/api/stacks`` entries written by hand for the in-memory tests;
- ``import_graph``: which of raydebug's modules import which (for the import rules' tests).

Both ``tests/`` and ``bench/`` put the repository's root on ``sys.path`` to import it.
"""
