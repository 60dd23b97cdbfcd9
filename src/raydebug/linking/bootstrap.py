"""The few lines ``raydebug link`` runs inside a target (its source is exec'd there, in a
namespace of its own; the linker never imports it for that).

``_link(ticket_path)`` reads the ticket and deletes it at once (the token is on disk only
for that long), imports raydebug from the target's own ``sys.path`` (the raydebug the target
would run under ``raydebug run``), starts the live link (:func:`raydebug.linking.inside.link`)
and writes its result, one JSON object, to the file the ticket names. It runs on the thread
gdb (or ``sys.remote_exec``) runs it on, holding the GIL: it returns quickly, and nothing
escapes it (an exception would print a traceback in the target's stderr).

Standard library only until raydebug is imported: this file must run in any Python 3.6+
(so a target too old for raydebug still gets its answer).
"""


def _link(ticket_path):  # type: ignore[no-untyped-def]  # run in any Python: no annotations
    import threading

    ident = threading.get_ident()
    # A thread Python started, or a C thread that ran Python before: its entry stays.
    known = ident in threading._active  # type: ignore[attr-defined]
    try:
        _link_here(ticket_path)  # type: ignore[no-untyped-call]
    finally:
        if not known:
            # A C thread lent for the call (an event loop's, on a Ray worker): starting the
            # link made threading name it "Dummy-N", a thread every debugger would list,
            # running, for ever; its thread state goes when the call returns.
            threading._active.pop(ident, None)  # type: ignore[attr-defined]


def _link_here(ticket_path):  # type: ignore[no-untyped-def]
    import json
    import os
    import sys

    result = {"pid": os.getpid(), "python": sys.version.split()[0],
              "executable": sys.executable}
    ticket = None
    try:
        with open(ticket_path, encoding="utf-8") as handle:
            ticket = json.load(handle)
    except (OSError, ValueError) as error:
        result.update(status="failed", why=f"the ticket cannot be read ({error})")
    finally:
        try:
            os.unlink(ticket_path)
        except OSError:
            pass
    if ticket is None:
        return
    try:
        from raydebug.linking.inside import link
    except ImportError as error:
        result.update(status="no-raydebug", why=str(error))
    else:
        try:
            result.update(link(ticket))
        except Exception as error:  # never into the target's stderr
            result.update(status="failed", why=f"{type(error).__name__}: {error}")
    partial = ticket["result"] + ".part"
    try:
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(result, handle)
        os.replace(partial, ticket["result"])  # the linker never reads half of it
    except OSError:
        pass
