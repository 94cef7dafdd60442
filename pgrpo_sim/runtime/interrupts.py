"""Ctrl-C (and SIGTERM) for the command line: `interrupt_handling` turns them into `KeyboardInterrupt` where
Python would drop it, `deferred_interrupts` holds them off while outputs move into place, `interrupt_requested` says
that one came."""

from __future__ import annotations

import contextlib
import os

REDELIVER_S = 0.05
"""Delay (seconds) before an interrupt that could not be raised where it arrived is raised again."""
HANDLED_SIGNALS = ("SIGINT", "SIGTERM")
"""The signals `interrupt_handling` turns into `KeyboardInterrupt` (names: resolved in the `signal` module)."""


class _Interrupts:
    """What `interrupt_handling` has seen: a Ctrl-C (`requested`), and how deep in `deferred_interrupts` it is."""

    requested = False
    deferred = 0


def interrupt_requested() -> bool:
    """Whether Ctrl-C (SIGINT) arrived since `interrupt_handling` began, raised or not."""
    return _Interrupts.requested


@contextlib.contextmanager
def deferred_interrupts():
    """Within the block, Ctrl-C is only recorded (`interrupt_requested`): for steps that must not stop half-way
    (outputs moved into place, temporaries removed)."""
    _Interrupts.deferred += 1
    try:
        yield
    finally:
        _Interrupts.deferred -= 1


def _inside_callback(frame) -> bool:
    """Whether Python runs a garbage-collection callback (JAX's `_xla_gc_callback`) or a finaliser in `frame`'s
    stack: an exception raised there is printed as "Exception ignored in …" and dropped, the program goes on."""
    import gc

    codes = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        if frame.f_code in codes or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _raise_again_later() -> None:
    """Send SIGINT to this process again after `REDELIVER_S`, if `interrupt_handling` still handles it."""
    import signal
    import threading

    def again() -> None:
        if signal.getsignal(signal.SIGINT) is _on_interrupt:
            os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(REDELIVER_S, again)
    timer.daemon = True
    timer.start()


def _on_interrupt(signum, frame) -> None:
    _Interrupts.requested = True
    if _Interrupts.deferred:
        return
    if _inside_callback(frame):
        _raise_again_later()
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupt_handling():
    """Within the block (main thread only), Ctrl-C (and SIGTERM, as `kill` sends it: the same clean-up, so no
    temporary is left behind) raises `KeyboardInterrupt` in the main thread, except where it would be dropped:
    inside a garbage-collection callback or finaliser it is raised again `REDELIVER_S` later, and a
    `KeyboardInterrupt` that such code dropped anyway (printed as "Exception ignored in …") is not printed but
    raised again the same way. Within `deferred_interrupts` it is only recorded. Either way `interrupt_requested`
    says that it came, so that a command that reaches its end after a dropped interrupt still stops (and moves no
    outputs into place: `outputs.staged_outputs`)."""
    import signal
    import sys

    _Interrupts.requested = False
    previous_hook = sys.unraisablehook

    def unraisable(info) -> None:
        if not issubclass(info.exc_type, KeyboardInterrupt):
            previous_hook(info)
            return
        _Interrupts.requested = True
        if not _Interrupts.deferred:
            _raise_again_later()

    # a signal ignored by the parent (Ctrl-C under `nohup`, in a background job) stays ignored
    previous = {getattr(signal, name): signal.getsignal(getattr(signal, name)) for name in HANDLED_SIGNALS}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, _on_interrupt)
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        sys.unraisablehook = previous_hook
        _Interrupts.requested = False  # outside the block, outputs are committed as if none came
