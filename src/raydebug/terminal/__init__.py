"""The terminal debugger (``raydebug attach``): pdb's commands over DAP, through the hub.

- ``commands``: pdb's command language, parsed (pure);
- ``breakpoints``: the breakpoint table and the DAP requests it becomes (pure);
- ``render``: what is printed, as text (pure);
- ``sources``: source code as the debuggee has it, read with ``ast``;
- ``remote``: the DAP connection on its own thread, called synchronously;
- ``debugger``: each command carried out (inspecting, breakpoints);
- ``running``: the commands that let the debuggee run, and the wait while it runs;
- ``attach``: choosing sessions, the prompt, ``--follow``.
"""
