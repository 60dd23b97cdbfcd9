"""``raydebug link``: a process started without raydebug becomes a live process.

Theory of operation. The linker (``raydebug link``, or the Ray task pinned to a node that
links its workers) reads what it needs to know about the target from ``/proc``
(:mod:`.target`: alive, whose, which Python) and refuses there, in one line, what cannot
work. Otherwise it writes a *ticket* (the hub's agent address, its token, the identity to
register) into a private directory, mode 0600, owned by the target's user (:mod:`.ticket`),
and runs one line of Python inside the target: by default with ptrace alone
(:mod:`.ptrace_call`: ``PyGILState_Ensure``, ``PyRun_SimpleString``, ``PyGILState_Release``
called on a thread that waits in a system call, never one waiting for the GIL), with gdb
and debugpy's attach library (:mod:`.inject`, ``RAYDEBUG_LINK_WITH=gdb``: gdb 13 cannot
call functions on a CPU with AMX), or with ``sys.remote_exec`` on 3.14+. That line execs
:mod:`.bootstrap`'s source, which reads the ticket, deletes it, imports raydebug *from the
target's own* ``sys.path`` and calls :func:`.inside.link` (:mod:`.inside`), which calls the same
:func:`raydebug.agent.start_live_link` that ``RAYDEBUG_LIVE=1`` calls at a process's start.
The bootstrap writes its result, one JSON object, which the linker reads once the call has
returned. From then on the target is an ordinary live process: ``ps``, ``stacks``,
``pause``, the cluster's breakpoints. :mod:`.local` links local processes (in parallel) and
waits until the hub lists them.

Nothing here imports ray; the Ray side (which workers, a task per node) is
:mod:`raydebug.integrations.ray.link_jobs`.

May import: ``raydebug.agent``, ``raydebug.errors``, ``raydebug.protocol`` (the link
protocol's version), ``raydebug.integrations.ray`` (in a Ray process only).
"""
