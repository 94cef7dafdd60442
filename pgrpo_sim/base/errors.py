"""The one error type of pgrpo-sim's domain errors."""


class PgrpoSimError(ValueError):
    """Invalid input or a request pgrpo-sim cannot honour: the message names the parameter and its allowed
    range (or what to do instead). A `ValueError`, so `except ValueError` keeps working; the command line
    catches it once and exits with status 2 (docs/guide/command-line.md)."""
