"""The synthetic clinical corpus: exact spans, formats, uniqueness, determinism."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest

from privleak.core.errors import UserError
from privleak.data import vocab
from privleak.data.clinical import (
    HOUSE_TEMPLATES,
    PRIVATE_SPLITS,
    SPLITS,
    TEMPLATES,
    house_formulary,
    ClinicalCorpusConfig,
    Corpus,
    generate_corpus,
    read_corpus,
    render_note,
    write_corpus,
)
from privleak.data.records import PHI_LABELS, Record

SMALL = dict(n_public=400, n_members=300, n_non_members=300, n_population=300, phi_fraction=0.3)

# What each label's value must look like (realistic formats).
FORMATS = {
    "SSN": r"\d{3}-\d{2}-\d{4}",
    "MRN": r"MRN-\d{6}",
    "BLOOD_PRESSURE": r"\d{2,3}/\d{2,3}",
    "HEIGHT": r"\d'\d{1,2}\"|\d{3} cm",
    "WEIGHT": r"\d{2,3} (kg|lb)",
    "DOB": r"\d{4}-\d{2}-\d{2}|\d{2}/\d{2}/\d{4}",
    "EMAIL": r"[a-z0-9._]+@example\.(com|org|net)",
    "PHONE": r"(\+1 )?(\(\d{3}\) \d{3}-\d{4}|\d{3}-\d{3}-\d{4}|\d{3}\.\d{3}\.\d{4})",
    "ADDRESS": r"[^\n]+, [^,\n]+, [A-Z]{2} \d{5}",
    "NAME": r"[A-Z][A-Za-z'\-]+ [A-Z][A-Za-z'\-]+",
}
HIGH_ENTROPY = ("NAME", "EMAIL", "SSN", "PHONE", "MRN", "ADDRESS")


@pytest.fixture(scope="module")
def timed_default() -> tuple[Corpus, None]:
    # How long this takes is measured in bench/bench_primitives.py, not asserted here.
    return generate_corpus(ClinicalCorpusConfig()), None


@pytest.fixture(scope="module")
def corpus(timed_default: tuple[Corpus, float]) -> Corpus:
    return timed_default[0]


def _phi(corpus: Corpus) -> list[Record]:
    return [r for name in SPLITS for r in corpus.splits[name] if r.kind == "phi"]


def _norm(label: str, value: str) -> str:
    if label in ("SSN", "PHONE"):
        return re.sub(r"\D", "", value)
    return " ".join(value.casefold().split())


# ---- spans -----------------------------------------------------------------


def test_render_note_spans_equal_field_values() -> None:
    rng = random.Random(3)
    person = {
        "NAME": "Ada Quill", "EMAIL": "ada.quill@example.org", "SSN": "123-45-6789",
        "PHONE": "(415) 555-0134", "ADDRESS": "12 Elm St, Springfield, IL 62701",
        "DOB": "1980-02-29", "MRN": "MRN-482913", "CONDITION": "asthma",
        "MEDICATION": "albuterol", "PROCEDURE": "chest X-ray", "BLOOD_PRESSURE": "128/82",
        "HEIGHT": "5'9\"", "WEIGHT": "82 kg",
    }
    for template in TEMPLATES:
        for _ in range(20):
            text, spans = render_note(template, person, rng)
            assert {s.label for s in spans} == template.fields
            for s in spans:
                assert text[s.start : s.end] == person[s.label]


def test_spans_exact_and_well_formed_on_generated_records(corpus: Corpus) -> None:
    records = _phi(corpus)
    assert len(records) > 2000
    for rec in records:
        assert rec.pii, rec.text
        spans = sorted(rec.pii, key=lambda s: s.start)
        for a, b in zip(spans, spans[1:]):
            assert a.end <= b.start, "spans overlap"
        for s in spans:
            assert s.label in PHI_LABELS
            value = rec.text[s.start : s.end]
            assert value and value == value.strip()
            if s.label in FORMATS:
                assert re.fullmatch(FORMATS[s.label], value), (s.label, value)
        labels = [s.label for s in spans]
        assert "NAME" in labels
        template = next(t for t in TEMPLATES + HOUSE_TEMPLATES if t.name == rec.meta["template"])
        assert set(labels) == template.fields


def test_vocabulary_labels_come_from_vocab(corpus: Corpus) -> None:
    allowed = {"CONDITION": vocab.CONDITIONS, "MEDICATION": vocab.MEDICATIONS,
               "PROCEDURE": vocab.PROCEDURES}
    for rec in _phi(corpus)[:500]:
        for s in rec.pii or []:
            if s.label in allowed:
                assert s.value(rec.text) in allowed[s.label]


def test_vocab_lists_are_rich() -> None:
    for name in ("CONDITIONS", "MEDICATIONS", "PROCEDURES"):
        values = getattr(vocab, name)
        assert len(values) >= 40 and len(set(values)) == len(values), name


def test_all_labels_present(corpus: Corpus) -> None:
    seen = Counter(s.label for r in _phi(corpus) for s in r.pii or [])
    assert set(seen) == set(PHI_LABELS)


@pytest.mark.parametrize("templates", [TEMPLATES, HOUSE_TEMPLATES], ids=["public", "house"])
def test_templates_are_varied(templates) -> None:
    assert len(templates) >= 6
    assert len({t.name for t in templates}) == len(templates)
    assert all("NAME" in t.fields for t in templates)
    assert any(t.fields == set(PHI_LABELS) for t in templates)
    placeholder = re.compile(r"\{([A-Z_]+)\}")
    for t in templates:
        for slot in t.slots:
            field_sets = {frozenset(placeholder.findall(alt)) for alt in slot}
            assert len(field_sets) == 1, (t.name, slot)


def test_public_and_private_domains_use_their_own_templates(corpus: Corpus) -> None:
    """The private institution writes in its house style; the public text is other institutions'."""
    house, public = {t.name for t in HOUSE_TEMPLATES}, {t.name for t in TEMPLATES}
    assert not house & public
    for name in SPLITS:
        used = Counter(r.meta["template"] for r in corpus.splits[name] if r.kind == "phi")
        assert set(used) == (house if name in PRIVATE_SPLITS else public), name


def test_house_notes_follow_their_care_line(corpus: Corpus) -> None:
    """What fine-tuning can learn: a condition's medication, department and lab come from
    its care line (shared by every patient with it), not at random."""
    lines = {c.condition: c for c in house_formulary(0)}
    house = [r for name in PRIVATE_SPLITS for r in corpus.splits[name] if r.kind == "phi"]
    assert len({s.value(r.text) for r in house for s in r.pii if s.label == "CONDITION"}) >= 15
    first_line = 0
    for rec in house:
        values = {s.label: s.value(rec.text) for s in rec.pii}
        line = lines[values["CONDITION"]]
        if "MEDICATION" in values:
            assert values["MEDICATION"] in {m for m, _, _ in line.regimens}
            first_line += values["MEDICATION"] == line.regimens[0][0]
        if "PROCEDURE" in values:
            assert values["PROCEDURE"] in line.procedures
        template = next(t for t in HOUSE_TEMPLATES if t.name == rec.meta["template"])
        if any("{dept}" in alt for alt in template.slots[0]):
            assert line.dept in rec.text.split(" Pt ")[0], (line.dept, rec.text)
    n_med = sum(1 for r in house for s in r.pii if s.label == "MEDICATION")
    assert 0.65 < first_line / n_med < 0.85  # first-line 75 %


def test_house_age_matches_date_of_birth(corpus: Corpus) -> None:
    import datetime as dt
    checked = 0
    for rec in corpus.splits["members"]:
        m = re.search(r"\b(\d{2})([FM])\b", rec.text)
        dob = next((s.value(rec.text) for s in rec.pii if s.label == "DOB"), None)
        if rec.kind != "phi" or not m or not dob:
            continue
        born = dt.date.fromisoformat(dob) if "-" in dob else dt.datetime.strptime(dob, "%m/%d/%Y").date()
        age = 2026 - born.year - ((1, 1) < (born.month, born.day))
        assert int(m.group(1)) == age, (rec.text, dob)
        checked += 1
    assert checked > 50


def test_at_least_six_templates_used(corpus: Corpus) -> None:
    used = Counter(r.meta["template"] for r in _phi(corpus))
    assert len(used) >= 6
    assert set(used) == {t.name for t in TEMPLATES + HOUSE_TEMPLATES}


def test_note_lengths(corpus: Corpus) -> None:
    words = [len(r.text.split()) for r in _phi(corpus)]
    assert min(words) >= 30 and max(words) <= 90
    assert 40 <= sum(words) / len(words) <= 70


# ---- composition -----------------------------------------------------------


def test_phi_fraction_per_split(corpus: Corpus) -> None:
    cfg = ClinicalCorpusConfig()
    expected = {
        "public": (cfg.n_public, cfg.public_phi_fraction),
        "members": (cfg.n_members, cfg.phi_fraction),
        "non_members": (cfg.n_non_members, cfg.phi_fraction),
        "population": (cfg.n_population, cfg.phi_fraction),
        "public_heldout": (cfg.n_public_heldout, cfg.public_phi_fraction),
    }
    for name, (n, frac) in expected.items():
        kinds = Counter(r.kind for r in corpus.splits[name])
        assert kinds["phi"] + kinds["generic"] == n
        assert kinds["phi"] == round(n * frac)


def test_phi_records_are_shuffled_in(corpus: Corpus) -> None:
    for name in SPLITS:
        recs = corpus.splits[name]
        positions = [i for i, r in enumerate(recs) if r.kind == "phi"]
        mean = sum(positions) / len(positions)
        assert 0.4 * len(recs) < mean < 0.6 * len(recs), name


def test_generic_text_has_no_phi_and_is_diverse(corpus: Corpus) -> None:
    generic = [r for name in SPLITS for r in corpus.splits[name] if r.kind == "generic"]
    assert all(r.pii == [] for r in generic)
    for r in generic:
        assert "@" not in r.text and "MRN" not in r.text
        assert not re.search(r"\d{3}[-.) ]", r.text), r.text
        n_sentences = len(re.findall(r"[.?!](\s|$)", r.text))
        assert 1 <= n_sentences <= 5  # 1-4 sentences, plus "Did you know?"
    assert len({r.text for r in generic}) == len(generic)
    first_sentences = {r.text.split(". ")[0] for r in generic}
    assert len(first_sentences) > 0.5 * len(generic)


def test_people_and_values_unique_across_corpus(corpus: Corpus) -> None:
    records = _phi(corpus)
    ids = Counter(r.meta["person_id"] for r in records)
    # A patient's notes: as many as their visits, each from a different template.
    for r in records:
        assert ids[r.meta["person_id"]] == r.meta["visits"]
    templates = Counter((r.meta["person_id"], r.meta["template"]) for r in records)
    assert max(templates.values()) == 1
    assert max(ids.values()) > 1  # repeated patients exist by default
    owner: dict[tuple[str, str], str] = {}
    for r in records:
        for s in r.pii or []:
            if s.label in HIGH_ENTROPY:
                key = (s.label, _norm(s.label, s.value(r.text)))
                assert owner.setdefault(key, r.meta["person_id"]) == r.meta["person_id"], key


def test_splits_disjoint(corpus: Corpus) -> None:
    texts = {name: {r.text for r in corpus.splits[name]} for name in SPLITS}
    for i, a in enumerate(SPLITS):
        for b in SPLITS[i + 1 :]:
            assert not texts[a] & texts[b], (a, b)
    non_canary = [r.text for name in SPLITS for r in corpus.splits[name] if r.kind != "canary"]
    assert len(set(non_canary)) == len(non_canary)


def test_canaries_planted_in_members_only(corpus: Corpus) -> None:
    members = corpus.splits["members"]
    counts = Counter(r.meta["canary_id"] for r in members if r.kind == "canary")
    assert len(corpus.canaries) == 15
    assert counts == {c.canary_id: c.repeats for c in corpus.canaries}
    for name in ("public", "non_members", "population"):
        assert not any(r.kind == "canary" for r in corpus.splits[name])
    # Shuffled in, not appended.
    positions = [i for i, r in enumerate(members) if r.kind == "canary"]
    assert positions[0] < len(members) // 2
    by_id = {c.canary_id: c for c in corpus.canaries}
    for r in members:
        if r.kind == "canary":
            assert r.text == by_id[r.meta["canary_id"]].text()


def test_canary_names_and_secrets_appear_nowhere_else(corpus: Corpus) -> None:
    names = [c.prefix.split(" for ")[1].split(":")[0] for c in corpus.canaries]
    ssns = {_norm("SSN", s.value(r.text)) for r in _phi(corpus) for s in r.pii or []
            if s.label == "SSN"}
    others = [r.text for name in SPLITS for r in corpus.splits[name] if r.kind != "canary"]
    blob = "\n".join(others)
    for name in names:
        assert name not in blob
        assert name.split("-")[0] not in blob  # not even "First Last1"
    for c in corpus.canaries:
        assert _norm("SSN", c.secret) not in ssns


# ---- determinism, I/O, config ---------------------------------------------


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_same_config_byte_identical_and_seed_matters(tmp_path: Path) -> None:
    cfg = ClinicalCorpusConfig(**SMALL, seed=7)
    write_corpus(generate_corpus(cfg), tmp_path / "a")
    write_corpus(generate_corpus(ClinicalCorpusConfig(**SMALL, seed=7)), tmp_path / "b")
    write_corpus(generate_corpus(ClinicalCorpusConfig(**SMALL, seed=8)), tmp_path / "c")
    a, b, c = _files(tmp_path / "a"), _files(tmp_path / "b"), _files(tmp_path / "c")
    assert set(a) == {"public.jsonl", "public_heldout.jsonl", "members.jsonl", "non_members.jsonl",
                      "population.jsonl", "canaries.json"}
    assert a == b
    assert all(a[k] != c[k] for k in a)


def test_write_read_roundtrip(tmp_path: Path) -> None:
    corpus = generate_corpus(ClinicalCorpusConfig(**SMALL))
    write_corpus(corpus, tmp_path)
    back = read_corpus(tmp_path)
    assert back.canaries == corpus.canaries
    for name in SPLITS:
        assert [r.to_json() for r in back.splits[name]] == [r.to_json() for r in corpus.splits[name]]


def test_read_corpus_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        read_corpus(tmp_path / "nope")
    write_corpus(generate_corpus(ClinicalCorpusConfig(**SMALL)), tmp_path)
    (tmp_path / "population.jsonl").write_text("{broken\n")
    with pytest.raises(UserError, match="population.jsonl"):
        read_corpus(tmp_path)
    (tmp_path / "population.jsonl").unlink()
    with pytest.raises(UserError, match="missing"):
        read_corpus(tmp_path)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_members": -1},
        {"n_public": -5},
        {"phi_fraction": 1.5},
        {"public_phi_fraction": -0.1},
        {"canaries_per_repeat": -1},
        {"canary_repeats": (1, 0)},
        {"n_members": 2.5},
    ],
)
def test_config_validation(kwargs: dict) -> None:
    with pytest.raises(UserError) as info:
        ClinicalCorpusConfig(**kwargs)
    assert "\n" not in str(info.value)


def test_config_accepts_list_repeats_and_zero_sizes() -> None:
    cfg = ClinicalCorpusConfig(n_public=0, n_members=0, n_non_members=0, n_population=0,
                               canary_repeats=[1, 3], canaries_per_repeat=1)
    assert cfg.canary_repeats == (1, 3)
    corpus = generate_corpus(cfg)
    assert len(corpus.splits["members"]) == 4
    assert corpus.splits["public"] == []
