"""Scrubbing: replace the PII the analyser finds, in one of three modes.

* ``mask``: every value becomes its type in angle brackets, ``<NAME>``,
  ``<EMAIL>``, ``<SSN>`` … This is Presidio's ``replace`` operator with its
  default ``<ENTITY_TYPE>`` convention (``<PERSON>``, ``<EMAIL_ADDRESS>``),
  spelled with PrivLeak's labels (PERSON → NAME, EMAIL_ADDRESS → EMAIL, …;
  see :data:`privleak.defenses.pii.ENTITY_TO_LABEL`).
* ``tag``: type plus an index, ``<NAME_1>``, ``<NAME_2>``; the same value
  gets the same index everywhere in the corpus, so co-reference survives.
* ``pseudonym``: consistent, fluent fake values, so the text still reads
  like the original for training. Within one :class:`Scrubber` (one corpus)
  the same real value always gets the same fake, different real values get
  different fakes, and a fake never equals its original. Fakes are drawn
  from a generator seeded by (seed, type, value), so they do not depend on
  record order. Names are mapped token by token ("John Smith" and a later
  "Mr. Smith" share the fake surname); e-mails use reserved ``example.*``
  domains; SSNs, phones, MRNs keep their format with new digits; addresses,
  dates, blood pressure, height and weight are fresh plausible values in
  the original's format.

A fake never equals a real value of the corpus either (another person's
name, SSN or date): :meth:`Pseudonymizer.reserve` keeps every value the
analyser found — and every labelled span, where the corpus has them — out
of the draws, under the leak-counting rule (``normalise_value``), so the
trained model never carries a real value only because it was a fake, and
the attacks count no false leak. Scrubbing a corpus in memory reserves
every value before the first replacement; :meth:`Scrubber.apply` alone
reserves its own text's.

The fakes are keyed by the seed: whoever knows it can test a guess (is
this the fake that SSN would get?). Keep it secret when pseudonymised text
leaves your hands; the audit's attacks do not use it.

Use one :class:`Scrubber` per corpus (tags and pseudonyms are consistent
within it). The text splicing is done by Presidio's ``AnonymizerEngine`` on
the analyser's disjoint spans.
"""

from __future__ import annotations

import datetime as _dt
import random
import re
import string
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator, Sequence

from privleak.core.errors import UserError
from privleak.core.normalise import ALNUM, DATE, DIGITS, TEXT, TextView, is_digit_label, normalise_value, rule
from privleak.data.canaries import derive_seed
from privleak.data.records import PiiSpan, Record
from privleak.defenses.pii import Detection, PiiAnalyzer, get_analyzer

MODES: tuple[str, ...] = ("mask", "tag", "pseudonym")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

_EXAMPLE_DOMAINS = ("example.com", "example.org", "example.net")
_TITLES = {"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir"}
# --------------------------------------------------------------------------
# pseudonyms


class Pseudonymizer:
    """Consistent fake values for one corpus (see the module docstring)."""

    def __init__(self, seed: int = 0, terms: dict[str, Sequence[str]] | None = None) -> None:
        from faker.providers.person.en_US import Provider as _Person

        self.seed = int(seed)
        self._first = sorted(set(_Person.first_names))
        self._last = sorted(set(_Person.last_names))
        self._values: dict[tuple[str, str], str] = {}
        self._used: dict[str, set[str]] = {}
        self._tokens: dict[str, str] = {}
        self._used_tokens: set[str] = set()
        self._reserved: dict[str, set[str]] = {}
        self._terms = {k: sorted(set(v)) for k, v in (terms or {}).items()}
        self._faker = None

    def _rng(self, *parts: object) -> random.Random:
        return random.Random(derive_seed(self.seed, "pseudonym:" + "\x1f".join(map(str, parts))))

    def _fake(self):
        if self._faker is None:
            from faker import Faker

            self._faker = Faker("en_US")
        return self._faker

    def reserve(self, label: str, value: str) -> None:
        """Keep the real ``value`` (of type ``label``) out of every fake.

        Out under the rule leaks are counted by (:func:`~privleak.core.normalise.find_values`): no fake of
        any type may show it — not as its own value, and not inside one (a fake city "New Keith" shows the
        one-word name "Keith", an e-mail "glenda.morris@…" the surname "Morris"). Terms drawn from a list
        (conditions, medications) are not reserved: they are not identifiers, and a short list would run out.
        """
        if label in self._terms:
            return
        key = normalise_value(label, value)
        if not key:
            return
        r = rule(label)
        if r == DATE and not _ISO_DATE.fullmatch(key):
            r = TEXT  # an unparsed date is compared as text
        self._reserved.setdefault(r, set()).add(key)

    def _clashes(self, fake: str) -> bool:
        """Whether ``fake`` shows a reserved real value under the leak rule: one of its digit chains or
        dates, or a piece of its text bounded by non-alphanumerics."""
        res = self._reserved
        if not res:
            return False
        view = TextView(fake)
        if view.numbers & res.get(DIGITS, set()) or view.dates & res.get(DATE, set()):
            return True
        text_keys = res.get(TEXT, set())
        if text_keys:
            runs = [(m.start(), m.end()) for m in re.finditer(r"[^\W_]+", view.norm)]
            for i, (a, _) in enumerate(runs):
                for _, b in runs[i:i + 8]:
                    if view.norm[a:b] in text_keys:
                        return True
        alnum = res.get(ALNUM)
        if alnum:
            joined = "".join(ch for ch in view.norm if ch.isalnum())
            return any(k in joined for k in alnum)
        return False

    def __call__(self, label: str, value: str) -> str:
        if label == "NAME":
            return self._name(value)
        key = normalise_value(label, value)
        if is_digit_label(label) and any(ch.isdigit() for ch in value):
            # The digits are the identity; the format (and an "MRN-" prefix)
            # follows each occurrence.
            fake_digits = self._unique(label, key, lambda rng: self._digit_string(label, key, rng))
            return _render_digits(value, fake_digits, skip_country_code=label == "PHONE")
        if label == "DOB" and _ISO_DATE.fullmatch(key):
            # One fake date per real date (its formats are one value, as leak counting says),
            # written the way each occurrence writes it.
            iso = self._unique(label, key, lambda rng: _random_date(rng).isoformat())
            return _date_like(value, _dt.date.fromisoformat(iso))
        cached = self._values.get((label, key))
        if cached is not None:
            return cached
        fake = self._unique(label, key, lambda rng: self._draw(label, value, rng))
        self._values[(label, key)] = fake
        return fake

    def _unique(self, label: str, key: str, draw: Callable[[random.Random], str]) -> str:
        cached = self._values.get((label, key))
        if cached is not None:
            return cached
        used = self._used.setdefault(label, set())
        terms = label in self._terms
        rng = self._rng(label, key)
        fake, fkey = "", key
        for attempt in range(2000):
            fake = draw(rng)
            fkey = fake if is_digit_label(label) else normalise_value(label, fake)
            # A short term list can run out of unused fakes: then only "not itself".
            if fkey != key and (terms or not self._clashes(fake)) and (attempt >= 1000 or fkey not in used):
                break
        used.add(fkey)  # (a one-value term list ends the loop on its own value: the only fake it has)
        self._values[(label, key)] = fake
        return fake

    # -- per type ----------------------------------------------------------

    def _name(self, value: str) -> str:
        fake = self._name_by_tokens(value)
        if not self._clashes(fake):
            return fake
        # Token by token, the fake spells another real person's whole name (small name pools make this
        # happen in large corpora): this value alone gets a fresh surname.
        key = normalise_value("NAME", value)
        cached = self._values.get(("NAME", key))
        if cached is None:
            m = re.search(r"([^\W\d_]+)([^\w]*)$", fake)
            rng = self._rng("NAME-whole", key)
            cached = fake
            for _ in range(1000 if m else 0):
                cand = fake[:m.start(1)] + _match_case(m.group(1), rng.choice(self._last)) + m.group(2)
                if normalise_value("NAME", cand) != key and not self._clashes(cand):
                    cached = cand
                    break
            self._values[("NAME", key)] = cached
        return cached

    def _name_by_tokens(self, value: str) -> str:
        parts = re.split(r"(\s+)", value)
        out = []
        first_done = False
        for part in parts:
            if not part or part.isspace():
                out.append(part)
                continue
            bare = part.rstrip(".,")
            if bare.casefold() in _TITLES or not any(ch.isalpha() for ch in part):
                out.append(part)
                continue
            if len(bare) == 1:  # an initial
                out.append(self._token(bare, pool="initial") + part[len(bare):])
                continue
            pieces = bare.split("-")
            fakes = [self._token(p, pool="last" if (first_done or i > 0) else "first")
                     for i, p in enumerate(pieces)]
            out.append("-".join(fakes) + part[len(bare):])
            first_done = True
        return "".join(out)

    def _token(self, token: str, pool: str) -> str:
        key = token.casefold()
        fake = self._tokens.get(key)
        if fake is None:
            rng = self._rng("NAME", key)
            choices = {"first": self._first, "last": self._last,
                       "initial": list(string.ascii_uppercase)}[pool]
            for _ in range(1000):
                cand = rng.choice(choices)
                if cand.casefold() != key and cand.casefold() not in self._used_tokens and not self._clashes(cand):
                    break
            else:  # pragma: no cover - more distinct names (and reserved ones) than the pool holds
                cand = token + rng.choice(string.ascii_lowercase)
            fake = cand
            self._tokens[key] = fake
            self._used_tokens.add(fake.casefold())
        return _match_case(token, fake)

    def _digit_string(self, label: str, key: str, rng: random.Random) -> str:
        out = []
        for i in range(len(key)):
            # NANP area code and exchange start 2-9; SSN area never 000/666/9xx.
            lo = 2 if label == "PHONE" and len(key) == 10 and i in (0, 3) else 0
            hi = 8 if label == "SSN" and len(key) == 9 and i == 0 else 9
            out.append(str(rng.randint(lo, hi)))
        s = "".join(out)
        if label == "SSN" and len(key) == 9 and (s[:3] in ("000", "666") or s[3:5] == "00" or s[5:] == "0000"):
            s = "1" + s[1:3] + "1" + s[4:8] + "1"
        return s

    def _draw(self, label: str, value: str, rng: random.Random) -> str:
        if label == "EMAIL":
            first, last = rng.choice(self._first).lower(), rng.choice(self._last).lower()
            local = rng.choice((f"{first}.{last}", f"{first}{last}{rng.randint(1, 999)}",
                                f"{first[0]}{last}{rng.randint(1, 999)}", f"{first}_{last}{rng.randint(1, 999)}"))
            return re.sub(r"[^a-z0-9._]", "", local) + "@" + rng.choice(_EXAMPLE_DOMAINS)
        if label == "ADDRESS":
            return self._address(value, rng)
        if label == "DOB":
            return _fake_date(value, rng)
        if label == "BLOOD_PRESSURE":
            sys_ = rng.randint(98, 172)
            return f"{sys_}/{rng.randint(58, min(104, sys_ - 25))}"
        if label == "HEIGHT":
            return _fake_height(value, rng)
        if label == "WEIGHT":
            return _fake_weight(value, rng)
        if label in self._terms and len(self._terms[label]) > 1:
            return rng.choice(self._terms[label])
        return _scramble(value, rng)

    def _address(self, value: str, rng: random.Random) -> str:
        fake = self._fake()
        fake.seed_instance(rng.getrandbits(64))
        state = fake.state_abbr(include_territories=False, include_freely_associated_states=False)
        tail = f"{fake.city()}, {state} {fake.zipcode_in_state(state)}"
        has_tail = bool(re.search(r",?\s*[A-Z]{2}\.?\s+\d{5}(?:-\d{4})?\s*$", value))
        if re.match(r"^\s*\d", value):
            street = fake.street_address()
            return f"{street}, {tail}" if has_tail else street
        return tail if has_tail else fake.city()


def _match_case(original: str, fake: str) -> str:
    if original.isupper() and len(original) > 1:
        return fake.upper()
    if original.islower():
        return fake.lower()
    return fake


def _render_digits(template: str, digits: str, skip_country_code: bool) -> str:
    """``template`` with its digits replaced, in order, by ``digits``."""
    n_template = sum(ch.isdigit() for ch in template)
    skip = n_template - len(digits) if skip_country_code and n_template == len(digits) + 1 else 0
    it = iter(digits)
    out = []
    for ch in template:
        if ch.isdigit():
            if skip:
                skip -= 1
                out.append(ch)
            else:
                out.append(next(it, ch))
        else:
            out.append(ch)
    return "".join(out)


def _scramble(value: str, rng: random.Random) -> str:
    """Format-preserving replacement: digits → digits, letters → letters of the same case."""
    out = []
    for ch in value:
        if ch.isdigit():
            out.append(rng.choice(string.digits))
        elif ch.isalpha() and ch.isascii():
            pool = string.ascii_uppercase if ch.isupper() else string.ascii_lowercase
            out.append(rng.choice(pool))
        else:
            out.append(ch)
    return "".join(out)


_MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December"]


def _random_date(rng: random.Random) -> _dt.date:
    return _dt.date.fromordinal(rng.randint(_dt.date(1935, 1, 1).toordinal(), _dt.date(2006, 12, 31).toordinal()))


def _fake_date(value: str, rng: random.Random) -> str:
    return _date_like(value, _random_date(rng))


def _date_like(value: str, d: _dt.date) -> str:
    """``d`` written the way ``value`` writes its date."""
    v = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
        return d.isoformat()
    m = re.fullmatch(r"(\d{1,2})([/.-])(\d{1,2})\2(\d{2}|\d{4})", v)
    if m:
        sep, year = m.group(2), (f"{d.year}" if len(m.group(4)) == 4 else f"{d.year % 100:02d}")
        mm = f"{d.month:02d}" if len(m.group(1)) == 2 else str(d.month)
        dd = f"{d.day:02d}" if len(m.group(3)) == 2 else str(d.day)
        return f"{mm}{sep}{dd}{sep}{year}"
    if re.match(r"^\d", v):
        return f"{d.day} {_MONTH_NAMES[d.month - 1]} {d.year}"
    if re.match(r"^[A-Za-z]", v):
        return f"{_MONTH_NAMES[d.month - 1]} {d.day}, {d.year}"
    return d.isoformat()


def _fake_height(value: str, rng: random.Random) -> str:
    if "cm" in value:
        return f"{rng.randint(150, 198)} cm"
    if re.search(r"\d\s?m\b", value):
        return f"{rng.randint(150, 198) / 100:.2f} m"
    inches = rng.randint(58, 78)
    if "'" in value:
        closing = '"' if ('"' in value or "''" in value) else ""
        return f"{inches // 12}'{inches % 12}{closing}"
    return f"{inches // 12} ft {inches % 12} in"


def _fake_weight(value: str, rng: random.Random) -> str:
    m = re.search(r"[A-Za-z]+\s*$", value)
    unit = m.group(0).strip() if m else "kg"
    space = " " if re.search(r"\d\s+[A-Za-z]", value) else ""
    n = rng.randint(47, 135) if unit.lower().startswith("k") else rng.randint(100, 300)
    return f"{n}{space}{unit}"


# --------------------------------------------------------------------------
# scrubbing


@dataclass
class ScrubbedText:
    """One scrubbed text and what was replaced: ``replacements`` holds
    ``(detection, new_start, new_end, new_value)`` in text order."""

    text: str
    original: str
    replacements: list[tuple[Detection, int, int, str]] = field(default_factory=list)

    def map_span(self, start: int, end: int) -> tuple[int, int] | None:
        """Where ``original[start:end]`` sits in the scrubbed text, or None
        when any part of it was replaced."""
        shift = 0
        for det, new_start, new_end, _ in self.replacements:
            if det.start < end and start < det.end:
                return None
            if det.end <= start:
                shift += (new_end - new_start) - (det.end - det.start)
        return start + shift, end + shift


class Scrubber:
    """Scrub texts with one analyser, in one mode; one instance per corpus.

    ``labels``: the PII types to replace (default: those of the analyser,
    itself defaulting to NAME, EMAIL, SSN, PHONE, ADDRESS, DOB, MRN).
    ``analyzer``: a :class:`PiiAnalyzer`; default the shared one for
    ``labels`` (see :func:`privleak.defenses.pii.get_analyzer`).
    """

    def __init__(
        self,
        analyzer: PiiAnalyzer | None = None,
        *,
        mode: str = "mask",
        labels: Iterable[str] | str | None = None,
        seed: int = 0,
    ) -> None:
        mode = str(mode).strip().lower()
        if mode not in MODES:
            raise UserError(f"unknown scrub mode {mode!r}; use one of: {', '.join(MODES)}")
        self.mode = mode
        if analyzer is None:
            analyzer = get_analyzer(labels)
        self.analyzer = analyzer
        self.labels: tuple[str, ...] = (
            analyzer.labels if labels is None else analyzer.check_labels(labels)
        )
        self.seed = int(seed)
        self.pseudonyms = Pseudonymizer(seed=self.seed, terms=getattr(analyzer, "terms", None))
        self._tags: dict[str, dict[str, int]] = {}
        self.counts: Counter[str] = Counter()
        self._anonymizer = None
        self._operators = None

    # -- replacement values --------------------------------------------------

    def replacement(self, label: str, value: str) -> str:
        """What ``value`` (of type ``label``) becomes in this scrubber's mode."""
        if self.mode == "mask":
            return f"<{label}>"
        if self.mode == "tag":
            table = self._tags.setdefault(label, {})
            key = normalise_value(label, value)
            if key not in table:
                table[key] = len(table) + 1
            return f"<{label}_{table[key]}>"
        return self.pseudonyms(label, value)

    def _engine(self):
        if self._anonymizer is None:
            from presidio_anonymizer import AnonymizerEngine
            from presidio_anonymizer.entities import OperatorConfig

            self._anonymizer = AnonymizerEngine()
            self._operators = {}
            for label in self.labels:
                if self.mode == "mask":
                    self._operators[label] = OperatorConfig("replace", {"new_value": f"<{label}>"})
                else:
                    # Values are assigned in reading order before the engine
                    # runs (it splices from the end); the lambda looks them up.
                    self._operators[label] = OperatorConfig(
                        "custom", {"lambda": (lambda v, _l=label: self.replacement(_l, v))}
                    )
        return self._anonymizer

    def apply(self, text: str, detections: Sequence[Detection]) -> ScrubbedText:
        """Replace ``detections`` (disjoint, e.g. from the analyser) in ``text``."""
        dets = sorted((d for d in detections if d.label in self.labels), key=lambda d: d.start)
        if not dets:
            return ScrubbedText(text=text, original=text)
        for a, b in zip(dets, dets[1:]):
            if b.start < a.end:
                raise ValueError("detections overlap; pass them through resolve_overlaps first")
        if self.mode == "pseudonym":
            self.reserve(text, dets)
        for d in dets:  # reading order fixes tag indices and pseudonym draws
            self.replacement(d.label, text[d.start : d.end])
            self.counts[d.label] += 1
        # Presidio's anonymizer rebuilds the whole string for every
        # replacement; a long text with many values goes through it in
        # pieces of about _SPLICE_CHARS characters, cut between values.
        pieces, out_text, reps, shift = _splice_groups(text, dets), [], [], 0
        for lo, hi, group in pieces:
            new_text, items = self._anonymize(text[lo:hi], group, lo)
            out_text.append(new_text)
            base = lo + shift
            reps += [(d, base + it.start, base + it.end, it.text) for d, it in zip(group, items)]
            shift += len(new_text) - (hi - lo)
        return ScrubbedText(text="".join(out_text), original=text, replacements=reps)

    def _anonymize(self, text: str, dets: Sequence[Detection], offset: int):
        """``text`` (a piece of the original starting at ``offset``) with
        ``dets`` replaced; (new text, Presidio's items in text order)."""
        if not dets:
            return text, []
        from presidio_anonymizer.entities import RecognizerResult

        engine = self._engine()
        result = engine.anonymize(
            text=text,
            analyzer_results=[RecognizerResult(d.label, d.start - offset, d.end - offset, d.score) for d in dets],
            operators=self._operators,
            merge_entities_with_spaces=False,
        )
        items = sorted(result.items, key=lambda i: i.start)
        if len(items) != len(dets):  # pragma: no cover - disjoint input never merges
            raise RuntimeError("presidio-anonymizer changed the span set")
        return result.text, items

    def reserve(self, text: str, detections: Iterable[Detection]) -> None:
        """Keep the values ``detections`` find in ``text`` out of the pseudonyms (no-op in other modes)."""
        for d in detections:
            if d.label in self.labels:
                self.pseudonyms.reserve(d.label, text[d.start : d.end])

    def iter_scrub(
        self, texts: Iterable[str], on_analysed: Callable[[int], None] | None = None
    ) -> Iterator[ScrubbedText]:
        """Scrubbed texts, streaming; pseudonyms analyse every text first (``on_analysed(1)`` after each),
        so that no fake equals a value found anywhere in ``texts``."""
        pairs: Iterable[tuple[str, list[Detection]]] = _zip_lazy(texts, self.analyzer, self.labels)
        if self.mode == "pseudonym":
            found = []
            for text, dets in pairs:
                self.reserve(text, dets)
                found.append((text, dets))
                if on_analysed is not None:
                    on_analysed(1)
            pairs = found
        for text, dets in pairs:
            yield self.apply(text, dets)

    def scrub_text(self, text: str) -> str:
        return next(self.iter_scrub([text])).text

    def scrub_texts(self, texts: Iterable[str], on_progress: Callable[[int], None] | None = None) -> list[str]:
        out = []
        for s in self.iter_scrub(texts):
            out.append(s.text)
            if on_progress is not None:
                on_progress(1)
        return out

    def scrub_records(
        self, records: Sequence[Record], on_progress: Callable[[int], None] | None = None
    ) -> list[Record]:
        """New records with scrubbed text. ``pii`` keeps exactly the
        ground-truth spans that survived (re-positioned), i.e. the PII still in
        the text; spans that were (partly) replaced are dropped. ``meta``
        gains ``scrub_mode`` and ``n_scrubbed``."""
        out = []
        for rec, s in zip(records, self.iter_scrub(r.text for r in records)):
            out.append(self.scrubbed_record(rec, s))
            if on_progress is not None:
                on_progress(1)
        return out

    def scrubbed_record(self, rec: Record, s: ScrubbedText) -> Record:
        """``rec`` with the text of ``s`` (its scrubbed form) and its surviving spans."""
        pii = None
        if rec.pii is not None:
            pii = []
            for sp in rec.pii:
                moved = s.map_span(sp.start, sp.end)
                if moved is not None:
                    pii.append(PiiSpan(moved[0], moved[1], sp.label))
        meta = dict(rec.meta)
        meta["scrub_mode"] = self.mode
        meta["n_scrubbed"] = len(s.replacements)
        return replace(rec, text=s.text, pii=pii, meta=meta)


_SPLICE_CHARS = 65_536


def _splice_groups(text: str, dets: Sequence[Detection]) -> list[tuple[int, int, list[Detection]]]:
    """``text`` cut into consecutive pieces ``(start, end, detections inside)``
    of about ``_SPLICE_CHARS`` characters, never inside a detection."""
    if len(text) <= _SPLICE_CHARS:
        return [(0, len(text), list(dets))]
    out, lo, group = [], 0, []
    for d in dets:
        if group and d.start - lo > _SPLICE_CHARS:
            out.append((lo, d.start, group))
            lo, group = d.start, []
        group.append(d)
    out.append((lo, len(text), group))
    return out


def _zip_lazy(texts: Iterable[str], analyzer: PiiAnalyzer, labels: Sequence[str]):
    """(text, detections) pairs while the analyser streams through ``texts``."""
    buffer: deque[str] = deque()

    def feed():
        for t in texts:
            buffer.append(t)
            yield t

    for dets in analyzer.iter_analyze(feed(), labels):
        yield buffer.popleft(), dets


def scrub_corpus(
    records: Sequence[Record],
    *,
    mode: str = "mask",
    labels: Iterable[str] | str | None = None,
    seed: int = 0,
    analyzer: PiiAnalyzer | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> list[Record]:
    """Scrub a whole corpus with one fresh :class:`Scrubber` (the scrub arm's entry point)."""
    return Scrubber(analyzer, mode=mode, labels=labels, seed=seed).scrub_records(records, on_progress)


__all__ = ["MODES", "Pseudonymizer", "ScrubbedText", "Scrubber", "scrub_corpus"]
