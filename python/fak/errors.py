"""Typed exceptions for fak's Status codes: every failed call raises a subclass of fak.Error."""

from __future__ import annotations


class Error(Exception):
    """A fak call failed. ``code`` is the Status code name, ``message`` names what is wrong."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class InvalidArgumentError(Error, ValueError):
    """A malformed argument (a bad token id, an unknown role, an empty prompt...)."""


class NotFoundError(Error, LookupError):
    """Something named does not exist (a model path, a segment, an image)."""


class CorruptionError(Error):
    """A file or record is malformed."""


class IOFailureError(Error):
    """An operating-system I/O call failed (Status code IOError)."""


class UnsupportedError(Error):
    """A format, architecture or feature fak does not implement."""


class ResourceExhaustedError(Error):
    """A limit was reached (context length, KV budget)."""


class FailedPreconditionError(Error):
    """The object is not in a state for this call (a closed session, a locked journal)."""


class VerificationFailedError(Error):
    """A signature, digest, witness or journal check failed."""


class UnavailableError(Error):
    """A dependency cannot be reached now; retry later."""


_BY_CODE = {
    "InvalidArgument": InvalidArgumentError,
    "NotFound": NotFoundError,
    "Corruption": CorruptionError,
    "IOError": IOFailureError,
    "Unsupported": UnsupportedError,
    "ResourceExhausted": ResourceExhaustedError,
    "FailedPrecondition": FailedPreconditionError,
    "VerificationFailed": VerificationFailedError,
    "Unavailable": UnavailableError,
}


def error_class(code: str) -> type[Error]:
    """The exception class of a Status code name (fak.Error for an unknown one)."""
    return _BY_CODE.get(code, Error)
