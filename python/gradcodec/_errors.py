# SPDX-License-Identifier: BSD-3-Clause
"""The errors gradcodec raises: one class per exit code of the gradcodec CLI (docs/cli.md)."""


class Error(Exception):
    """Any gradcodec error; ``code`` is the exit code the CLI gives for it."""

    exit_code = 4

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = self.exit_code if code is None else int(code)


class UsageError(Error, ValueError):
    """A bad pipeline, preset, option or argument (exit code 1)."""

    exit_code = 1


class InputError(Error):
    """A tensor or file refused: a dtype gradcodec does not store, NaN/Inf for a lossy
    pipeline, a file that is not a container, a failed write (exit code 2)."""

    exit_code = 2


class CorruptError(Error):
    """A damaged container: a failed checksum, a size or structure that does not hold
    (exit code 3)."""

    exit_code = 3


class InternalError(Error):
    """A broken invariant inside gradcodec: a bug to report (exit code 4)."""

    exit_code = 4


class MismatchError(Error):
    """A decoded result that differs from what was encoded (exit code 5)."""

    exit_code = 5
