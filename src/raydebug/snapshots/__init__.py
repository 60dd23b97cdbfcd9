"""Snapshots: a failure's or a snapshot point's frames and locals, captured without pausing.

``format`` is the one shape a snapshot has everywhere (the agent that captures it, the
control message that carries it as a dict, the hub that keeps it in memory and as a JSON
file, the read-only session that serves it): frozen dataclasses turned to and from plain JSON
dicts, never pickle. ``capture`` builds one from a traceback or a frame within ``limits``
(depth, width, repr length, bytes), which also holds the rate limit of a process.
``value_paths`` is what a reader may evaluate in one: names and paths into the captured
values, parsed and walked, never run.

Plain data and the standard library only (and raydebug's errors): the agent imports it in
every process, the hub and the clients read it.

May import: ``raydebug.errors``.
"""
