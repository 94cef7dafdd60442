"""The command line's first moments. `pgrpo_sim.cli` imports this module before its other modules (JAX alone
takes about a second to import): when this process is the `pgrpo-sim` program (the console script, or
`python -m pgrpo_sim.cli`), Ctrl-C during those imports ends it with one line and exit 130, not a traceback.
`cli.main` then installs the full handling (`runtime.interrupts.interrupt_handling`). Imported as a library, it does
nothing.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import threading


def _exit_interrupted(signum, frame) -> None:
    os.write(2, b"pgrpo-sim: interrupted; nothing was written\n")
    os._exit(130)


def _is_the_program() -> bool:
    """Whether this process runs the command line itself (not Python code that imports it): the console script, or
    `python -m pgrpo_sim.cli` (whose package is imported before its `__main__` module exists, so the interpreter's own
    arguments tell)."""
    program = os.path.basename(sys.argv[0]) if sys.argv else ""
    orig = list(getattr(sys, "orig_argv", ()))
    as_module = any(a == "-m" and b == "pgrpo_sim.cli" for a, b in itertools.pairwise(orig))
    return program == "pgrpo-sim" or as_module


# not where the parent had Ctrl-C ignored (`nohup`, a shell's background job): Python keeps that, and so does this
main_thread = threading.current_thread() is threading.main_thread()
if _is_the_program() and main_thread and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _exit_interrupted)
