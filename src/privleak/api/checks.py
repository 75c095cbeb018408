"""Checks of a call's arguments that need no work (the command line makes the same ones: the same messages)."""

from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import UserError


def check_out_dir(path: Path, option: str = "--out") -> None:
    """Refuse an output directory that cannot be created or written, without creating it."""
    p = Path(path).expanduser()
    if p.exists():
        if not p.is_dir():
            raise UserError(f"{option} {p}: is a file, not a directory; choose a directory")
        if not os.access(p, os.W_OK | os.X_OK):
            raise UserError(f"{option} {p}: cannot write there (permission denied); choose a writable directory")
        return
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{option} {p}: cannot write there ({parent} is not a directory); choose a writable directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{option} {p}: cannot write there (permission denied in {parent}); choose a writable directory")


_FIELD_EXAMPLES = {"--text-field": "text", "--group-field": "patient_id", "--client-field": "clinic"}


def named_field(flag: str, value: str | None) -> str | None:
    """A flag naming a field of the user's data, refused when empty (``--group-field ''`` ran one unit per text,
    silently: an empty name matches no field)."""
    if value is not None and not value.strip():
        raise UserError(f"{flag} {value!r}: empty; name the field of your data (e.g. {flag} "
                        f"{_FIELD_EXAMPLES.get(flag, 'name')}), or leave the flag out")
    return value
