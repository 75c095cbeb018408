"""Errors a user can fix.

Every problem caused by the user's input (data, config, paths, parameters)
is raised as :class:`UserError`. The CLI prints its message on one line and
exits with code 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input: the message names it and the fix."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # One line, always: the CLI prints it as is.
        super().__init__(" ".join(str(message).split()))
