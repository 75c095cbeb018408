"""Canaries: random secrets planted in the training data (Carlini et al. 2019).

A canary is ``prefix + secret + suffix``. The secret is drawn uniformly from a
known space (``secret_format``: every ``#`` an independent uniform digit), so
an auditor can rank the true secret among candidates from the same space and
read memorisation off its rank (exposure). Every canary has its own prefix,
built around a synthetic name that appears nowhere else, so the model can
only complete the right secret by having memorised that very record.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from faker import Faker

from privleak.core.errors import UserError
from privleak.core.jsonlimits import loads
from privleak.core.io import atomic_open
from privleak.data.records import PiiSpan, Record

DEFAULT_FRAME = "Verification record for {name}: social security number {secret}."
DEFAULT_SECRET_FORMAT = "###-##-####"
# The label the secret span carries: the default secret is SSN-shaped, and
# PII leak counting treats canary secrets like any other SSN.
SECRET_LABEL = "SSN"


def derive_seed(seed: int, tag: str) -> int:
    """A seed for one named stream, so streams seeded from one user seed
    never replay each other's draws (Faker(seed) for canaries and Faker(seed)
    for patients would otherwise produce the same first names)."""
    digest = hashlib.sha256(f"{seed}:{tag}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True)
class Canary:
    canary_id: str
    prefix: str
    secret: str
    suffix: str
    repeats: int
    secret_format: str = DEFAULT_SECRET_FORMAT

    def text(self, secret: str | None = None) -> str:
        """The canary sentence, with ``secret`` swapped in for candidate scoring."""
        return self.prefix + (self.secret if secret is None else secret) + self.suffix

    def space_size(self) -> int:
        """Number of possible secrets (|R| in the exposure definition)."""
        return 10 ** self.secret_format.count("#")


def _fill_format(secret_format: str, digits: str) -> str:
    """Put ``digits`` into the ``#`` slots of ``secret_format`` in order."""
    it = iter(digits)
    return "".join(next(it) if ch == "#" else ch for ch in secret_format)


def _secret_to_int(secret_format: str, secret: str) -> int:
    """The secret's index in its space: its '#' digits read as one number."""
    if len(secret) != len(secret_format):
        raise ValueError(f"secret {secret!r} does not match format {secret_format!r}")
    digits = []
    for ch, fch in zip(secret, secret_format):
        if fch == "#":
            if not ch.isdigit():
                raise ValueError(f"secret {secret!r} does not match format {secret_format!r}")
            digits.append(ch)
        elif ch != fch:
            raise ValueError(f"secret {secret!r} does not match format {secret_format!r}")
    return int("".join(digits)) if digits else 0


def _check_frame(frame: str) -> None:
    if frame.count("{secret}") != 1 or frame.count("{name}") != 1:
        raise UserError(
            f"canary frame {frame!r} must contain '{{name}}' and '{{secret}}' exactly once each"
        )
    if frame.index("{name}") > frame.index("{secret}"):
        # The prefix is the attacker's prompt; without the name in it every
        # canary would share one prompt and ranks could not be attributed.
        raise UserError(f"canary frame {frame!r} must put '{{name}}' before '{{secret}}'")


def _check_secret_format(secret_format: str) -> None:
    if secret_format.count("#") == 0:
        raise UserError(
            f"canary secret format {secret_format!r} has no '#' digit slots; use e.g. '###-##-####'"
        )


def make_canaries(
    repeats: Sequence[int] = (1, 2, 4, 8, 16),
    per_repeat: int = 3,
    seed: int = 0,
    frame: str = DEFAULT_FRAME,
    secret_format: str = DEFAULT_SECRET_FORMAT,
) -> list[Canary]:
    """``per_repeat`` canaries for every repetition count in ``repeats``.

    Names are first name + double-barrelled surname, and distinct from each
    other, so each prefix is unique; secrets are uniform over the space and
    pairwise distinct.
    """
    _check_frame(frame)
    _check_secret_format(secret_format)
    if isinstance(per_repeat, bool) or not isinstance(per_repeat, int) or per_repeat < 0:
        raise UserError(f"canaries per repeat must be a non-negative integer, got {per_repeat!r}")
    for r in repeats:
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise UserError(f"canary repeat counts must be positive integers, got {r!r}")
    n_total = len(repeats) * per_repeat
    n_digits = secret_format.count("#")
    if n_total > 10**n_digits:
        raise UserError(
            f"{n_total} canaries need distinct secrets but format {secret_format!r} "
            f"has only {10**n_digits}; add '#' slots"
        )

    fake = Faker("en_US")
    fake.seed_instance(derive_seed(seed, "canaries.faker"))
    rng = random.Random(derive_seed(seed, "canaries.secrets"))
    head, tail = frame.split("{secret}")

    names: set[str] = set()
    secrets: set[str] = set()
    canaries: list[Canary] = []
    for r in repeats:
        for _ in range(per_repeat):
            name = _unique(lambda: _canary_name(fake), names)
            secret = _unique(
                lambda: _fill_format(
                    secret_format, "".join(rng.choice("0123456789") for _ in range(n_digits))
                ),
                secrets,
            )
            canaries.append(
                Canary(
                    canary_id=f"canary-{len(canaries):03d}",
                    prefix=head.replace("{name}", name),
                    secret=secret,
                    suffix=tail,
                    repeats=int(r),
                    secret_format=secret_format,
                )
            )
    return canaries


def canary_name(canary: Canary, frame: str = DEFAULT_FRAME) -> str | None:
    """The synthetic person a canary of ``frame`` names (it is PII too: masked in reports)."""
    head = frame.split("{secret}")[0]
    before, after = head.split("{name}")
    p = canary.prefix
    if p.startswith(before) and p.endswith(after) and len(p) > len(before) + len(after):
        return p[len(before) : len(p) - len(after)]
    return None


def known_pii(splits: Iterable[Iterable[Record]], canaries: Iterable[Canary]) -> dict[str, str]:
    """Every ground-truth PII value of a corpus: value → label (first label seen wins).

    The records' spans, then each canary's secret (as SSN) and the name in its
    frame (as NAME): what a report must mask.
    """
    out: dict[str, str] = {}
    for records in splits:
        for r in records:
            for s in r.pii or ():
                value = s.value(r.text)
                if value.strip():
                    out.setdefault(value, s.label)
    for c in canaries:
        if c.secret:
            out.setdefault(c.secret, SECRET_LABEL)
        name = canary_name(c)
        if name:
            out.setdefault(name, "NAME")
    return out


def _canary_name(fake: Faker) -> str:
    last1, last2 = fake.last_name(), fake.last_name()
    while last2 == last1:
        last2 = fake.last_name()
    return f"{fake.first_name()} {last1}-{last2}"


def _unique(draw: Any, seen: set[str], tries: int = 10_000) -> str:
    for _ in range(tries):
        value = draw()
        if value not in seen:
            seen.add(value)
            return value
    raise RuntimeError("could not draw a fresh value; the space is exhausted")


def sample_candidates(canary: Canary, n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct secrets, uniform over the canary's space, never the true one.

    Drawing i.i.d. and keeping first occurrences gives a uniform random
    n-subset; for spaces not much larger than n a permutation is cheaper
    than rejecting duplicates.
    """
    space = canary.space_size()
    if n < 0:
        raise UserError(f"number of canary candidates must be >= 0, got {n}")
    if n > space - 1:
        raise UserError(
            f"{n} candidates requested but canary {canary.canary_id} has only {space - 1} "
            f"other secrets in format {canary.secret_format!r}; ask for fewer"
        )
    true_idx = _secret_to_int(canary.secret_format, canary.secret)
    if n * 4 >= space:
        pool = rng.permutation(space)
        chosen = pool[pool != true_idx][:n]
    else:
        chosen = np.empty(0, dtype=np.int64)
        while len(chosen) < n:
            draw = rng.integers(0, space, size=int((n - len(chosen)) * 1.1) + 16, dtype=np.int64)
            merged = np.concatenate([chosen, draw])
            _, first = np.unique(merged, return_index=True)
            merged = merged[np.sort(first)]
            chosen = merged[merged != true_idx][:n]
    width = canary.secret_format.count("#")
    return [_fill_format(canary.secret_format, f"{int(v):0{width}d}") for v in chosen]


def canary_records(canaries: Iterable[Canary]) -> list[Record]:
    """Each canary ``repeats`` times, with the secret's span labelled SSN."""
    out: list[Record] = []
    for c in canaries:
        start = len(c.prefix)
        span = PiiSpan(start, start + len(c.secret), SECRET_LABEL)
        for copy in range(c.repeats):
            out.append(
                Record(
                    text=c.text(),
                    pii=[span],
                    meta={"kind": "canary", "canary_id": c.canary_id, "copy": copy},
                )
            )
    return out


def plant_canaries(members: list[Record], canaries: Iterable[Canary], seed: int) -> list[Record]:
    """A new list: ``members`` with every canary copy at a seeded random position.

    Copies are scattered rather than appended so a training run that stops
    early, or batches in order, still sees them spread over the epoch.
    """
    planted = canary_records(canaries)
    rng = random.Random(derive_seed(seed, "canaries.plant"))
    # Choose, for every slot of the merged list, whether it holds a canary:
    # a uniformly random interleaving that keeps the members' order.
    total = len(members) + len(planted)
    canary_slots = set(rng.sample(range(total), len(planted)))
    rng.shuffle(planted)
    out: list[Record] = []
    mi = ci = 0
    for pos in range(total):
        if pos in canary_slots:
            out.append(planted[ci])
            ci += 1
        else:
            out.append(members[mi])
            mi += 1
    return out


def save_canaries(path: str | os.PathLike[str], canaries: Iterable[Canary]) -> None:
    """Write canaries as JSON, atomically (same reason as write_jsonl)."""
    payload = {"version": 1, "canaries": [asdict(c) for c in canaries]}
    with atomic_open(path) as fh:
        json.dump(payload, fh, ensure_ascii=False, indent=1)
        fh.write("\n")


def load_canaries(path: str | os.PathLike[str]) -> list[Canary]:
    """Read canaries written by :func:`save_canaries`; a damaged file is a UserError."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: canary file not found; regenerate the corpus or fix the path")
    try:
        payload = loads(path.read_text(encoding="utf-8"))
        items = payload["canaries"]
        canaries = [
            Canary(
                canary_id=str(d["canary_id"]),
                prefix=str(d["prefix"]),
                secret=str(d["secret"]),
                suffix=str(d["suffix"]),
                repeats=int(d["repeats"]),
                secret_format=str(d.get("secret_format", DEFAULT_SECRET_FORMAT)),
            )
            for d in items
        ]
        for c in canaries:
            _secret_to_int(c.secret_format, c.secret)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{path}: not a valid canary file ({type(exc).__name__}: {exc}); regenerate it"
        ) from exc
    return canaries
