"""The terminal debugger (``raydebug attach``): pdb's commands over DAP, through the hub.

- ``commands``: pdb's command language, parsed (pure);
- ``breakpoints``: the breakpoint table and the DAP requests it becomes (pure);
- ``render``: what is printed, as text (pure);
- ``sources``: source code as the debuggee has it, read with ``ast``;
- ``remote``: the DAP connection on its own thread, called synchronously (``Debuggee``: the
  seam the commands see);
- ``context``: one session's state as the prompt sees it, and what every command shares;
- ``inspect_commands``: the stack, the source, values; ``breakpoint_commands``: break,
  clear...; ``running``: the commands that let the debuggee run, and the wait while it runs;
  ``session_commands``: the start, threads, quit, kill, help;
- ``debugger``: ``TerminalDebugger``, all of them behind ``execute``; ``snapshot_rules``: what
  it does differently on a snapshot (read-only: the looking commands only);
- ``group``: ``attach --group``, every paused process of a group as the threads of one
  prompt (the hub's group session);
- ``attach``: choosing sessions, the prompt, ``--follow``, a lost hub; ``console``: reading
  commands and printing, on a terminal or on pipes; ``interrupts``: Ctrl-C at the prompt is
  never lost; ``timing``: how long it waits before it says or gives up something (the
  environment may say otherwise).
"""
