"""The SFT starts that ship with the package (`pgrpo_sim/models/lm/starts/`), made here, not by hand (a tool of the
repository, not part of the package).

A start is trained once per setting and cached (`models.lm.pretrain`); the first commands a user types would wait for
that training (about half a minute on 2 cores). The starts those commands need ship instead, named by the hash of
every setting that changes them (`pretrain.start_file`), so a change of the recipe, the architecture or a default
leaves them unused rather than wrong, and `tests/tools/test_ship_starts.py` fails until they are made again:

    python tools/ship_starts.py            # train the missing starts, remove files no listed start names
    python tools/ship_starts.py --check    # exit 1 when a listed start is missing or a shipped file is not listed

Training runs under the command line's XLA settings (`runtime.jax_setup.fast_cpu_compilation`), as the commands would.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

SHIPPED = (dict(),)
"""`lm.config` keyword arguments of the shipped starts: the default configuration's (`validate`, `lm run` and
`sweep --model lm` without start settings; the batch does not change the start)."""


def _config_start(settings: dict) -> tuple:
    """`pretrain.pretrained_start`'s arguments for the start of `lm.config(**settings)`."""
    from pgrpo_sim import lm

    config = lm.config(**settings)
    return config.task, config.policy, config.start_accuracy, config.sft_seed, config.start_format


def wanted() -> dict[str, tuple]:
    """File name → `pretrained_start` arguments of every start in `SHIPPED`, as the current code names them."""
    from pgrpo_sim.models.lm import pretrain

    return {pretrain.start_file(pretrain.start_settings(*args)): args for args in map(_config_start, SHIPPED)}


def stale(folder: Path, names: dict[str, tuple] | None = None) -> tuple[list[str], list[str]]:
    """(listed starts missing from `folder`, files in `folder` that no listed start names); `names`: `wanted()`."""
    names = wanted() if names is None else names
    present = {path.name for path in folder.glob("sft-*.eqx")}
    return sorted(set(names) - present), sorted(present - set(names))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="make (or --check) the SFT starts shipped with pgrpo-sim")
    parser.add_argument("--check", action="store_true", help="exit 1 when the shipped starts are not the listed ones")
    args = parser.parse_args(argv)
    from pgrpo_sim.runtime.jax_setup import fast_cpu_compilation

    fast_cpu_compilation()
    from pgrpo_sim.models.lm import pretrain

    folder, names = pretrain.SHIPPED_STARTS, wanted()
    missing, extra = stale(folder, names)
    if args.check:
        for name in missing:
            print(f"missing: {folder / name} (run python tools/ship_starts.py)")
        for name in extra:
            print(f"not listed: {folder / name}")
        return int(bool(missing or extra))
    folder.mkdir(exist_ok=True)
    for name in extra:
        (folder / name).unlink()
        print(f"removed {name}")
    for name in missing:
        spec, shape, accuracy, seed, start_format = names[name]
        start = pretrain.train_start(spec, shape, accuracy, seed, start_format)
        pretrain.save_start(folder / name, start)
        (folder / name).chmod(0o644)  # package data: readable by every user
        print(f"wrote {name}: accuracy {start.accuracy:.3f} after {start.steps} SFT steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
