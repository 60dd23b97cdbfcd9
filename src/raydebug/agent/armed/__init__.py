"""Cluster breakpoints armed in a process without pydevd: nothing traced until one is hit.

``breakpoints`` (the breakpoint set as the hub sends it, armed here; what a hit does) drives
one backend per interpreter: ``monitoring`` (``sys.monitoring`` on 3.12+) or, on 3.10/3.11,
``code`` (the functions of the files with breakpoints swapped for code that ``rewrite``
compiled with a call before each breakpoint line; ``live_code`` finds those functions,
``shipped`` keeps the ones Ray rebuilt from shipped code, ``running_frames`` serves frames
already running the old code) and ``tracing`` (a trace function where code cannot be
rewritten). ``line_breakpoint`` is one breakpoint and what it evaluates at a hit (condition,
hit count, logpoint); ``watch`` is what a backend is given of the armed set; ``raised``
decides which raises the IDE's ``raised`` filter stops at.

A hit is handed to the caller's callback; this package never imports pydevd or the link.

May import: ``raydebug.errors``, ``raydebug.agent.report``,
``raydebug.snapshots.format``.
"""
