"""The seeded synthetic clinical corpus (PrivAI-Leak's data, done properly).

Five splits, in two domains:

* ``public``: the stand-in for public pre-training text. Generic medical
  text plus notes in *other institutions'* formats (``TEMPLATES``) about
  other synthetic people: a base model pre-trained on it knows the medical
  vocabulary and what a note looks like, but none of the private values and
  not the private institution's house style.
* ``public_heldout``: the same distribution, never trained on: the generic
  text on which forgetting is measured (does fine-tuning make the model
  worse at everything else?).
* ``members``: the fine-tuning set, from the private institution (Westbrook
  Health Centre, ``HOUSE_TEMPLATES``): ``phi_fraction`` of it are notes in
  its house style, the rest generic text, plus the planted canaries.
* ``non_members`` and ``population``: the same distribution, never trained on.

What fine-tuning can learn is population-level and shared by many
patients: the house's layout, section headers and abbreviations, and its
clinical regularities (``house_formulary``: each condition has its own
symptoms, regimens, procedures, monitoring lab and department; age, sex,
body size and blood pressure depend on the condition). What it must not
learn is each person's identifiers, the only per-record secrets. A
tokenizer trained on the public split covers the house's vocabulary: the
formulary draws from the same word lists, and two public formats use the
same abbreviations in other layouts.

Every note is assembled piece by piece and the exact character span of each
PHI value is recorded while the text is being built, so the ground truth
never depends on searching the text afterwards (which mislabels values that
occur twice or inside other values). Most patients have one note; a
fraction (``repeat_fraction``) come back for several visits
(``repeat_visits`` notes, each from a different template, same identifiers):
repeated PII, which Lukas et al. (2023) show leaks more, as in real notes.
All of a patient's notes land in the same split. High-entropy values (full
name, e-mail, SSN, phone, MRN, address) belong to one patient over the whole
corpus, so a leaked member value can never be a non-member's value too.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from faker import Faker

from privleak.core.errors import UserError
from privleak.data import vocab
from privleak.data.canaries import (
    Canary,
    derive_seed,
    load_canaries,
    make_canaries,
    plant_canaries,
    save_canaries,
)
from privleak.data.clinical_people import Registry, house_filler, new_house_person, new_person
from privleak.data.clinical_templates import HOUSE_TEMPLATES, PLACEHOLDER, TEMPLATES, CareLine, NoteTemplate, house_formulary
from privleak.data.records import PHI_LABELS, PiiSpan, Record, read_jsonl, write_jsonl

SPLITS: tuple[str, ...] = ("public", "public_heldout", "members", "non_members", "population")
PRIVATE_SPLITS: tuple[str, ...] = ("members", "non_members", "population")
CANARY_FILE = "canaries.json"


# --------------------------------------------------------------------------
# config and result


@dataclass
class ClinicalCorpusConfig:
    """Sizes are numbers of records before canaries are planted in members."""

    n_public: int = 3000  # = config.SyntheticConfig.n_public (tests/test_layers.py checks they agree)
    n_members: int = 1200
    n_non_members: int = 1200
    n_population: int = 1200
    n_public_heldout: int = 300
    phi_fraction: float = 0.8
    public_phi_fraction: float = 0.5
    canary_repeats: tuple[int, ...] = (1, 2, 4, 8, 16)
    canaries_per_repeat: int = 3
    repeat_fraction: float = 0.1  # of patients, who have several notes (visits)
    repeat_visits: tuple[int, ...] = (2, 4, 8)  # notes of such a patient, drawn uniformly
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_public", "n_members", "n_non_members", "n_population", "n_public_heldout",
                     "canaries_per_repeat", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise UserError(f"corpus config: {name} must be an integer, got {value!r}")
            if value < 0 and name != "seed":
                raise UserError(f"corpus config: {name} must be >= 0, got {value}")
        for name in ("phi_fraction", "public_phi_fraction", "repeat_fraction"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UserError(f"corpus config: {name} must be a number in [0, 1], got {value!r}")
            if not 0.0 <= float(value) <= 1.0:
                raise UserError(f"corpus config: {name} must be in [0, 1], got {value}")
        self.repeat_visits = tuple(self.repeat_visits)
        most = min(len(TEMPLATES), len(HOUSE_TEMPLATES))
        if not self.repeat_visits or any(isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= most
                                         for v in self.repeat_visits):
            raise UserError(f"corpus config: repeat_visits must be integers in 1..{most} (one note per template), "
                            f"got {self.repeat_visits!r}")
        # YAML/TOML give lists; a tuple keeps the config hashable and comparable.
        repeats = self.canary_repeats
        if isinstance(repeats, (str, bytes)) or not hasattr(repeats, "__iter__"):
            raise UserError(f"corpus config: canary_repeats must be a list of integers, got {repeats!r}")
        self.canary_repeats = tuple(repeats)
        for r in self.canary_repeats:
            if isinstance(r, bool) or not isinstance(r, int) or r < 1:
                raise UserError(
                    f"corpus config: canary_repeats must be positive integers, got {r!r}"
                )


@dataclass
class Corpus:
    splits: dict[str, list[Record]]
    canaries: list[Canary] = field(default_factory=list)


# --------------------------------------------------------------------------
# rendering


def _lab(rng: random.Random) -> str:
    analyte, lo, hi, decimals, unit = rng.choice(vocab.LAB_TESTS)
    return f"{analyte} {rng.uniform(lo, hi):.{decimals}f}{unit}"


def _filler(rng: random.Random) -> dict[str, str]:
    """Untagged note material; none of it identifies anyone."""
    lab1 = _lab(rng)
    lab2 = _lab(rng)
    while lab2.split()[0] == lab1.split()[0]:
        lab2 = _lab(rng)
    return {
        "facility": rng.choice(vocab.FACILITIES),
        "dept": rng.choice(vocab.DEPARTMENTS),
        "symptom": rng.choice(vocab.SYMPTOMS),
        "duration": rng.choice(vocab.DURATIONS),
        "dose": rng.choice(vocab.DOSES),
        "freq": rng.choice(vocab.FREQUENCIES),
        "followup": rng.choice(vocab.FOLLOW_UPS),
        "progress": rng.choice(vocab.PROGRESS),
        "pulse": str(rng.randint(56, 104)),
        "refills": str(rng.randint(0, 5)),
        "lab1": lab1,
        "lab2": lab2,
    }


def render_note(
    template: NoteTemplate, person: dict[str, str], rng: random.Random, filler: dict[str, str] | None = None,
) -> tuple[str, list[PiiSpan]]:
    """Text of one note and the exact spans of its PHI values.

    Offsets are counted while the pieces are appended, never recovered by
    searching, so a value that occurs twice gets both spans and a value that
    happens to occur inside another (a surname in a street name) gets none.
    ``filler``: the untagged material (default: drawn at random, as other
    institutions' notes are; house notes pass their care line's).
    """
    filler = _filler(rng) if filler is None else filler
    pieces: list[str] = []
    spans: list[PiiSpan] = []
    pos = 0
    for slot in template.slots:
        phrase = rng.choice(slot)
        if pieces:
            pieces.append(" ")
            pos += 1
        last = 0
        for m in PLACEHOLDER.finditer(phrase):
            literal = phrase[last : m.start()]
            pieces.append(literal)
            pos += len(literal)
            key = m.group(1)
            if key in PHI_LABELS:
                value = person[key]
                spans.append(PiiSpan(pos, pos + len(value), key))
            else:
                value = filler[key]
            pieces.append(value)
            pos += len(value)
            last = m.end()
        tail = phrase[last:]
        pieces.append(tail)
        pos += len(tail)
    return "".join(pieces), spans


def _fix_articles(text: str) -> str:
    # "a electrocardiogram" -> "an electrocardiogram"; "a MRI" -> "an MRI".
    return re.sub(r"\b([Aa]) (?=[aeiouAEIOU]|MRI\b|X-ray)", r"\1n ", text)


def generic_text(rng: random.Random) -> str:
    """1-4 sentences of PHI-free medical text from frames x vocabulary."""
    k = rng.choice((1, 1, 2, 2, 2, 3, 3, 4))
    frames = rng.sample(vocab.GENERIC_SENTENCES, k)
    sentences = []
    for frame in frames:
        c1, c2 = rng.sample(vocab.CONDITIONS, 2)
        s1, s2 = rng.sample(vocab.SYMPTOMS, 2)
        h1, h2 = rng.sample(vocab.HABITS, 2)
        sentence = frame.format(
            condition=c1, condition2=c2, symptom=s1, symptom2=s2, habit=h1, habit2=h2,
            medication=rng.choice(vocab.MEDICATIONS), procedure=rng.choice(vocab.PROCEDURES),
            organ=rng.choice(vocab.ORGANS), specialty=rng.choice(vocab.SPECIALTIES),
            population=rng.choice(vocab.POPULATIONS), adverb=rng.choice(vocab.ADVERBS),
            percent=rng.choice(vocab.PERCENTS), duration=rng.choice(vocab.DURATIONS),
            department=rng.choice(vocab.DEPARTMENTS),
        )
        sentences.append(sentence[0].upper() + sentence[1:])
    return _fix_articles(rng.choice(vocab.GENERIC_HEADERS) + " ".join(sentences))


# --------------------------------------------------------------------------
# the corpus


class _Generator:
    def __init__(self, cfg: ClinicalCorpusConfig, canaries: list[Canary]) -> None:
        self.fake = Faker("en_US")
        self.fake.seed_instance(derive_seed(cfg.seed, "clinical.faker"))
        self.rng = random.Random(derive_seed(cfg.seed, "clinical.rng"))
        self.registry = Registry(canaries)
        self.texts: set[str] = set()
        self.n_people = 0
        self.cfg = cfg
        self.visit_rng = random.Random(derive_seed(cfg.seed, "clinical.visits"))
        self.formulary = house_formulary(cfg.seed)

    def patient_records(self, n_notes: int, house: bool) -> list[Record]:
        """``n_notes`` notes about one new patient, each from a different template
        (the private institution's, or other institutions')."""
        patient = new_house_person(self.fake, self.rng, self.registry, self.formulary) if house else None
        person = patient.phi if patient else new_person(self.fake, self.rng, self.registry)
        self.n_people += 1
        out = []
        for template in self.rng.sample(HOUSE_TEMPLATES if house else TEMPLATES, n_notes):
            filler = house_filler(self.rng, patient) if patient else None
            text, spans = render_note(template, person, self.rng, filler)
            # Unique names make a repeat across patients impossible, and each
            # visit has its own template; keep the invariant explicit.
            assert text not in self.texts
            self.texts.add(text)
            out.append(Record(
                text=text,
                pii=spans,
                meta={"kind": "phi", "person_id": f"P{self.n_people:06d}", "template": template.name,
                      "visits": n_notes},
            ))
        return out

    def generic_record(self) -> Record:
        for _ in range(1000):
            text = generic_text(self.rng)
            if text not in self.texts:
                self.texts.add(text)
                return Record(text=text, pii=[], meta={"kind": "generic"})
        raise RuntimeError("generic text space exhausted")  # not reachable at sane sizes

    def split(self, n: int, phi_fraction: float, house: bool) -> list[Record]:
        n_phi = round(n * phi_fraction)
        records: list[Record] = []
        while len(records) < n_phi:
            visits = 1
            if self.visit_rng.random() < self.cfg.repeat_fraction:
                visits = self.visit_rng.choice(self.cfg.repeat_visits)
            records += self.patient_records(min(visits, n_phi - len(records)), house)
        records += [self.generic_record() for _ in range(n - n_phi)]
        self.rng.shuffle(records)
        return records


def generate_corpus(cfg: ClinicalCorpusConfig) -> Corpus:
    """All five splits and the canaries; the same cfg gives the same corpus."""
    canaries = make_canaries(cfg.canary_repeats, cfg.canaries_per_repeat, seed=cfg.seed)
    gen = _Generator(cfg, canaries)
    splits = {
        "public": gen.split(cfg.n_public, cfg.public_phi_fraction, house=False),
        "members": gen.split(cfg.n_members, cfg.phi_fraction, house=True),
        "non_members": gen.split(cfg.n_non_members, cfg.phi_fraction, house=True),
        "population": gen.split(cfg.n_population, cfg.phi_fraction, house=True),
        # Drawn last so the other splits do not change with its size.
        "public_heldout": gen.split(cfg.n_public_heldout, cfg.public_phi_fraction, house=False),
    }
    splits["members"] = plant_canaries(splits["members"], canaries, seed=cfg.seed)
    return Corpus(splits=splits, canaries=canaries)


def write_corpus(corpus: Corpus, out_dir: str | Path) -> None:
    """``<split>.jsonl`` for each split plus ``canaries.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in SPLITS:
        write_jsonl(out / f"{name}.jsonl", corpus.splits.get(name, []))
    save_canaries(out / CANARY_FILE, corpus.canaries)


def read_corpus(corpus_dir: str | Path) -> Corpus:
    """Read a corpus written by :func:`write_corpus`."""
    d = Path(corpus_dir)
    if not d.is_dir():
        raise UserError(f"{d}: corpus directory not found; generate it first or fix the path")
    splits: dict[str, list[Record]] = {}
    for name in SPLITS:
        path = d / f"{name}.jsonl"
        if not path.is_file():
            raise UserError(f"{path}: missing split file; regenerate the corpus into {d}")
        try:
            splits[name] = read_jsonl(path)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            # json.JSONDecodeError is a ValueError
            raise UserError(
                f"{path}: damaged split file ({type(exc).__name__}: {exc}); regenerate the corpus"
            ) from exc
    return Corpus(splits=splits, canaries=load_canaries(d / CANARY_FILE))


__all__ = [
    "HOUSE_TEMPLATES",
    "PRIVATE_SPLITS",
    "SPLITS",
    "TEMPLATES",
    "CareLine",
    "ClinicalCorpusConfig",
    "Corpus",
    "NoteTemplate",
    "generate_corpus",
    "generic_text",
    "house_formulary",
    "read_corpus",
    "render_note",
    "write_corpus",
]
