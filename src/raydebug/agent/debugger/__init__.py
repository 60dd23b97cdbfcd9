"""The process's pydevd (the *debugger*), reached only through ``facade``.

``facade`` (:class:`~.facade.Debugger`, the one object the agent talks to) runs pydevd with
``start`` (in-process, listening on no port, blind to raydebug's files and threads),
``clients`` (each client's data connection handed to pydevd), ``suspensions`` (who is
suspended, pauses a departing client must leave), ``tracing_keeper`` (tracing follows need),
``thread_tracing`` (other threads' trace functions set without a helper thread each),
``untraced`` (a stop made outside a trace function, which pydevd must not trace),
``blocked_threads`` (a thread a pause finds blocked in C, served by a stand-in until its call
returns), ``returns`` (a paused function that returned) and ``fork`` (a fork child's reset).
Every pydevd internal they use is listed, with why, in docs/pydevd_internals.md.

May import: ``raydebug.agent.own_frames``, ``raydebug.agent.report``,
``raydebug.gil_handoffs`` (pydevd's import, quick beside a busy thread).
"""
