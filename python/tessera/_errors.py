"""Tessera's exception classes and the reading of paths (one home for both: the package, its options and
its partitioner raise these)."""

import os


def _path(path, what="a path"):
    """A path as the bytes the file system knows it by (os.fsencode): a name that is not valid UTF-8
    (surrogate escapes in a str) reaches the library as the same bytes instead of failing to convert."""
    try:
        return os.fsencode(os.fspath(path))
    except TypeError:
        raise InvalidArgument("%s must be a path (str, bytes or os.PathLike), not %s"
                              % (what, _described(path))) from None


def _described(value):
    """'str ('2')', for messages about a value of the wrong type: its type and a short repr."""
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return "%s (%s)" % (type(value).__name__, text)


class Error(Exception):
    """Base class of every error Tessera raises."""


class InvalidArgument(Error, ValueError):
    """A bad model, input or argument: the caller can fix it."""


class Unsupported(Error, NotImplementedError):
    """Valid, but not implemented by Tessera."""


class InternalError(Error, RuntimeError):
    """A bug in Tessera."""


for _error in (Error, InvalidArgument, Unsupported, InternalError):
    _error.__module__ = "tessera"  # shown as tessera.InvalidArgument, where users catch it
del _error
