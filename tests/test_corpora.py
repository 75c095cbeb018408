"""The foreign test corpora (tests/corpora): determinism, exact ground truth,
label coverage, checksums, duplication, and that CLI-written files load."""

from __future__ import annotations

import collections
import ipaddress
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# tests/ is on sys.path (pytest's default import mode), so the package is "corpora" here;
# from the repository root it is also "tests.corpora" (python -m tests.corpora).
from corpora import (
    PRESIDIO_LABELS,
    build_domain_corpus,
    build_email_corpus,
    build_pii_corpus,
    build_shifted_corpus,
    write_jsonl,
)
from corpora import formats as F
from corpora.__main__ import main as corpora_main
from corpora.chat import mentions_any, name_index
from corpora.people import LOCALES

from privleak.data.loaders import load_corpus

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------- fixtures
# Default-size corpora, built once per session (about 7 s together).

@pytest.fixture(scope="module")
def pii_corpus():
    return build_pii_corpus()


@pytest.fixture(scope="module")
def email_corpus():
    return build_email_corpus()


@pytest.fixture(scope="module")
def shifted_corpus():
    return build_shifted_corpus()


@pytest.fixture(scope="module")
def domain_corpus():
    return build_domain_corpus()


@pytest.fixture(scope="module")
def all_records(pii_corpus, email_corpus, shifted_corpus, domain_corpus):
    return {
        "pii": pii_corpus, "email": email_corpus, "shifted-a": shifted_corpus[0], "shifted-b": shifted_corpus[1],
        "domain": domain_corpus[0], "domain-public": domain_corpus[1],
    }


def _dumps(records) -> bytes:
    return "\n".join(json.dumps(r, ensure_ascii=False, sort_keys=False) for r in records).encode()


# -------------------------------------------------------------- determinism

_SMALL = {
    "pii": lambda s: build_pii_corpus(150, s),
    "email": lambda s: build_email_corpus(150, s),
    "shifted": lambda s: sum(build_shifted_corpus(60, s), []),
    "domain": lambda s: sum(build_domain_corpus(80, 40, s), []),
}


@pytest.mark.parametrize("kind", sorted(_SMALL))
def test_same_seed_same_bytes_other_seed_differs(kind):
    build = _SMALL[kind]
    a, b, c = _dumps(build(3)), _dumps(build(3)), _dumps(build(4))
    assert a == b
    assert a != c


def test_cli_output_is_identical_across_processes(tmp_path):
    # A second interpreter (fresh hash seed) must write the very same bytes.
    out_here, out_there = tmp_path / "here.jsonl", tmp_path / "there.jsonl"
    assert corpora_main(["email", "--out", str(out_here), "--n", "60", "--seed", "5"]) == 0
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    subprocess.run([sys.executable, "-m", "tests.corpora", "email", "--out", str(out_there), "--n", "60", "--seed", "5"],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    assert out_here.read_bytes() == out_there.read_bytes()


# ------------------------------------------------------------ ground truth

# Temporal words: any of them outside a DATE_TIME span means an unlabelled date.
_TEMPORAL = set("""today tomorrow yesterday tonight morning afternoon evening weekend week weeks month months year
years day days hour hours minute minutes monday tuesday wednesday thursday friday saturday sunday daily weekly
monthly quarterly annual annually heute gestern woche wochen monat monate jahr jahre jahren tage tagen aujourd
demain semaine semaines mois années jours heures vandaag morgen gisteren maand jaar jaren dagen hoy mañana ayer
semana semanas año años días oggi domani ieri settimana settimane mesi mese anno anni giorni""".split())
# Month names of every language used ("May" only capitalised: "may" is a verb).
_TEMPORAL |= {m.lower() for ms in F.MONTHS.values() for m in ms if m != "May"}
_WORD = re.compile(r"\w+")


def _covered(spans, s, e):
    return any(a <= s and e <= b for a, b, _ in spans)


def _problems(rec):
    """Ways the ground truth could be incomplete: an entity-like string
    outside every span."""
    text, spans = rec["text"], rec["pii"]
    out = []
    hits = set(_WORD.findall(text.lower())) & (_TEMPORAL | {"may"})
    for w in hits:  # usually only month names inside labelled dates
        for m in re.finditer(r"\b" + w + r"\b", text, re.IGNORECASE):
            if (w != "may" or m.group(0) == "May") and not _covered(spans, m.start(), m.end()):
                out.append(("unlabelled temporal word", m.group(0)))
    out += [("unlabelled e-mail", text[m.start() - 10 : m.end() + 10]) for m in re.finditer(r"\S@\S", text)
            if not _covered(spans, m.start() + 1, m.start() + 2)]
    out += [("unlabelled URL", m.group(0)) for m in re.finditer(r"https?://|www\.", text) if not _covered(spans, m.start(), m.end())]
    # A labelled name/place/number must be labelled wherever else it occurs.
    values = {text[s:e] for s, e, lab in spans if lab in ("PERSON", "LOCATION", "ORGANIZATION", "NRP", "EMAIL_ADDRESS", "PHONE_NUMBER")}
    for v in values:
        for start in _word_occurrences(text, v):
            if not _covered(spans, start, start + len(v)):
                out.append(("value labelled once but not here", v))
    return out


def _word_occurrences(text, v):
    """Start offsets of ``v`` in ``text`` not inside a longer word (str.find:
    a regex per value is too slow on the mailbox)."""
    i = text.find(v)
    while i >= 0:
        j = i + len(v)
        if (i == 0 or not text[i - 1].isalnum()) and (j == len(text) or not text[j].isalnum()):
            yield i
        i = text.find(v, i + 1)


def _check_value(label: str, v: str) -> bool:
    """A light format check per label: a span shifted by even one character
    fails it (and the checksum tests below)."""
    digits = re.sub(r"\D", "", v)
    if label == "EMAIL_ADDRESS":
        return re.fullmatch(r"[^\s@<>(),;]+@[a-z0-9.-]+\.[a-z]{2,}", v) is not None
    if label == "URL":
        return re.fullmatch(r"(https?://|www\.)[^\s]+[A-Za-z0-9/]", v) is not None
    if label == "IP_ADDRESS":
        ipaddress.ip_address(v)
        return True
    if label == "PHONE_NUMBER":
        return 8 <= len(digits) <= 15 and re.fullmatch(r"[+(]?[0-9][0-9 ()./-]*[0-9]", v) is not None
    if label in ("CREDIT_CARD", "US_SSN", "US_BANK_NUMBER", "UK_NHS"):
        return re.fullmatch(r"[0-9][0-9 -]*[0-9]", v) is not None
    if label in ("PERSON", "LOCATION", "ORGANIZATION", "NRP"):
        return v[0].isalnum() and (v[-1].isalnum() or v[-1] in ".)'")  # Faker writes some Italian towns as "Vestigne'"
    return True


def test_spans_are_exact_sorted_and_disjoint(all_records):
    bad = []
    for name, records in all_records.items():
        for i, rec in enumerate(records):
            text, spans = rec["text"], rec["pii"]
            assert isinstance(text, str) and text == text.strip() and text, (name, i)
            assert isinstance(spans, list), (name, i)
            prev_end = 0
            for s, e, lab in spans:
                assert isinstance(s, int) and isinstance(e, int) and 0 <= s < e <= len(text), (name, i, s, e)
                assert s >= prev_end, f"{name}[{i}]: overlapping spans {spans}"
                prev_end = e
                v = text[s:e]
                if v != v.strip() or not _check_value(lab, v):
                    bad.append((name, i, lab, v))
    assert not bad, bad[:20]


def test_ground_truth_has_no_unlabelled_entities(all_records):
    found = collections.Counter()
    for name, records in all_records.items():
        for rec in records:
            for kind, what in _problems(rec):
                found[(name, kind, what)] += 1
    assert not found, found.most_common(20)


def _presidio_entity_names() -> set[str]:
    """Entity names that appear as string literals in the installed Presidio's
    predefined recognizers.  Read as text: importing presidio_analyzer pulls in
    torch and transformers (~10 s), too slow for this file's budget."""
    import importlib.util

    spec = importlib.util.find_spec("presidio_analyzer")  # locates without importing
    root = Path(spec.origin).parent / "predefined_recognizers"
    names = set()
    for py in root.rglob("*.py"):
        names |= set(re.findall(r"[\"']([A-Z][A-Z0-9_]{2,})[\"']", py.read_text(encoding="utf-8")))
    return names


def test_labels_are_presidio_entity_names(all_records):
    supported = _presidio_entity_names()
    assert set(PRESIDIO_LABELS) <= supported, set(PRESIDIO_LABELS) - supported
    used = {lab for records in all_records.values() for r in records for _, _, lab in r["pii"]}
    assert used <= set(PRESIDIO_LABELS)


def test_checksummed_identifiers_are_valid(all_records):
    checks = {
        "CREDIT_CARD": F.luhn_valid, "IBAN_CODE": F.iban_valid, "UK_NHS": F.nhs_valid,
        "MEDICAL_LICENSE": F.dea_valid, "CRYPTO": F.btc_valid,
    }
    seen = collections.Counter()
    for records in all_records.values():
        for r in records:
            for s, e, lab in r["pii"]:
                v = r["text"][s:e]
                if lab in checks:
                    assert checks[lab](v), (lab, v)
                    seen[lab] += 1
                if lab == "US_SSN":
                    d = re.sub(r"\D", "", v)
                    assert len(d) == 9 and d[:3] not in ("000", "666") and d[0] != "9" and d[3:5] != "00" and d[5:] != "0000", v
    assert set(seen) == set(checks)


def test_check_digit_helpers_on_published_examples():
    assert F.iban_valid("GB82 WEST 1234 5698 7654 32") and not F.iban_valid("GB83 WEST 1234 5698 7654 32")
    assert F.luhn_valid("4111 1111 1111 1111") and not F.luhn_valid("4111 1111 1111 1112")
    assert F.dea_valid("AP5836727") and not F.dea_valid("AP5836728")
    assert F.nhs_valid("943 476 5919") and not F.nhs_valid("943 476 5918")
    assert F.btc_valid("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2") and F.btc_valid("3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy")
    # BIP-173 test vector.
    assert F.bech32_segwit_v0(bytes.fromhex("751e76e8199196d454941c45d1b3a323f1433bd6")) == \
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"


# -------------------------------------------------------------- PII corpus


def test_pii_corpus_coverage(pii_corpus):
    assert len(pii_corpus) == 3000
    counts = collections.Counter(lab for r in pii_corpus for _, _, lab in r["pii"])
    assert set(counts) == set(PRESIDIO_LABELS)
    assert min(counts.values()) >= 30, counts
    assert {r["meta"]["locale"] for r in pii_corpus} == set(LOCALES)
    assert {r["meta"]["domain"] for r in pii_corpus} == {"email", "chat", "legal", "finance", "hr"}
    empty = sum(1 for r in pii_corpus if not r["pii"])
    assert 0.15 <= empty / len(pii_corpus) <= 0.25
    assert max(len(r["pii"]) for r in pii_corpus) <= 6
    assert all(r["meta"]["seed"] == 0 for r in pii_corpus)


def test_pii_corpus_has_varied_surface_forms(pii_corpus):
    vals = collections.defaultdict(list)
    for r in pii_corpus:
        for s, e, lab in r["pii"]:
            vals[lab].append(r["text"][s:e])
    cards, ibans, phones = vals["CREDIT_CARD"], vals["IBAN_CODE"], vals["PHONE_NUMBER"]
    assert any(" " in c for c in cards) and any("-" in c for c in cards) and any(c.isdigit() for c in cards)
    assert {c.replace(" ", "").replace("-", "")[0] for c in cards} >= {"2", "3", "4", "5", "6"}  # several brands
    assert any(" " in i for i in ibans) and any(" " not in i for i in ibans)
    assert len({i[:2] for i in ibans}) >= 8
    assert any(p.startswith("+") for p in phones) and any("(" in p for p in phones) and any("." in p for p in phones)
    assert any(p.isdigit() for p in phones)
    # Records in the locales' own languages, not only English.
    assert {r["meta"]["lang"] for r in pii_corpus} == {"en", "de", "fr", "nl", "es", "it"}


def test_pii_splits_differ():
    a, b = build_pii_corpus(200, 0), build_pii_corpus(200, 1)
    assert {r["text"] for r in a}.isdisjoint({r["text"] for r in b} - {""}) or \
        len({r["text"] for r in a} & {r["text"] for r in b}) < 20  # only short PII-free chat lines may coincide


# ------------------------------------------------------------ email corpus


def test_email_corpus_duplication_and_authors(email_corpus):
    assert len(email_corpus) == 2000
    counts = collections.Counter(r["text"] for r in email_corpus)
    assert sum(1 for c in counts.values() if c >= 40) >= 5
    kinds = collections.Counter(r["meta"]["kind"] for r in email_corpus)
    assert set(kinds) == {"boilerplate", "notification", "message", "reply"}
    authors = {r["meta"]["author"] for r in email_corpus}
    employees = {a for a in authors if re.fullmatch(r"[a-z]{3}-\d{3}", a)}
    assert 120 <= len(employees) <= 160
    assert 3 <= len({r["meta"]["company"] for r in email_corpus}) <= 4
    assert all({"author", "thread", "company", "kind"} <= set(r["meta"]) for r in email_corpus)
    # Replies quote earlier messages.
    assert sum(1 for r in email_corpus if r["meta"]["kind"] == "reply" and "\n> " in r["text"]) > 300


def test_email_near_duplicates_share_templates(email_corpus):
    notes = [r for r in email_corpus if r["meta"]["kind"] == "notification"]
    groups = collections.Counter(r["meta"]["dup_group"] for r in notes)
    assert len(groups) == 5 and min(groups.values()) >= 30
    # Same template, different values: the texts are mostly distinct.
    assert len({r["text"] for r in notes}) > 0.8 * len(notes)


# ----------------------------------------------------------- shifted corpus


def _bigrams(text):
    t = text.lower()
    return collections.Counter(t[i : i + 2] for i in range(len(t) - 1))


def test_shifted_sources_are_separable_without_a_model(shifted_corpus):
    a, b = shifted_corpus
    assert len(a) == len(b) == 600
    assert {r["meta"]["source"] for r in a} == {"A"} and {r["meta"]["source"] for r in b} == {"B"}
    # Nearest centroid on character-bigram frequencies (the 300 commonest
    # bigrams), fitted on half of each source and tested on the other half.
    fit_a, fit_b = collections.Counter(), collections.Counter()
    for r in a[::2]:
        fit_a.update(_bigrams(r["text"]))
    for r in b[::2]:
        fit_b.update(_bigrams(r["text"]))
    vocab = [k for k, _ in (fit_a + fit_b).most_common(300)]

    def vec(c):
        total = sum(c.values()) or 1
        return [c[k] / total for k in vocab]

    ca, cb = vec(fit_a), vec(fit_b)

    def closer_to_a(text):
        v = vec(_bigrams(text))
        return sum((x - y) ** 2 for x, y in zip(v, ca)) < sum((x - y) ** 2 for x, y in zip(v, cb))

    acc = (sum(closer_to_a(r["text"]) for r in a[1::2]) + sum(not closer_to_a(r["text"]) for r in b[1::2])) / 600
    assert acc >= 0.95


# ------------------------------------------------------------ domain corpus


def test_domain_corpus_house_style_and_disjoint_people(domain_corpus):
    private, public = domain_corpus
    assert len(private) == 2000 and len(public) == 1500
    for r in private + public:
        assert r["text"].startswith("KESTREL FIBRE | CHAT TRANSCRIPT\nRef: KF-")
        assert "\nWRAP: " in r["text"] and "DPA" in r["text"]
    assert {r["meta"]["agent"] for r in private}.isdisjoint({r["meta"]["agent"] for r in public})

    def identifying(records):
        out = set()
        for r in records:
            for s, e, lab in r["pii"]:
                v = r["text"][s:e].lower()
                if lab in ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "IP_ADDRESS") or \
                        (lab in ("PERSON", "LOCATION") and " " in v and len(v) > 6):
                    out.add(v)
        return out

    # No private identifier is a public span value (and every e-mail, phone,
    # card ... in the public text is a span: see the ground-truth test) ...
    assert not identifying(private) & identifying(public)
    # ... and no private full name appears anywhere in the public text.
    names = name_index({r["text"][s:e] for r in private for s, e, lab in r["pii"] if lab == "PERSON"})
    assert sum(len(v) for v in names.values()) > 1500
    assert not [r["text"] for r in public if mentions_any(r["text"], names)]


# ---------------------------------------------------------------------- CLI


@pytest.mark.parametrize("kind", ["pii", "email", "shifted-a", "shifted-b", "domain", "domain-public"])
def test_cli_files_load_with_the_corpus_loader(kind, tmp_path):
    out = tmp_path / f"{kind}.jsonl"
    extra = ["--private-n", "100"] if kind == "domain-public" else []
    assert corpora_main([kind, "--out", str(out), "--n", "40", "--seed", "2", *extra]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    loaded = load_corpus(out)
    assert len(loaded) == len(rows) == 40
    assert [r.text for r in loaded] == [row["text"] for row in rows]
    for row in rows:
        for s, e, lab in row["pii"]:
            assert 0 <= s < e <= len(row["text"]) and lab in PRESIDIO_LABELS
    if kind == "email":
        assert all(isinstance(row["author"], str) and row["author"] == row["meta"]["author"] for row in rows)


def test_write_jsonl_round_trips(tmp_path, pii_corpus):
    path = write_jsonl(pii_corpus[:50], tmp_path / "x.jsonl")
    back = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert back == pii_corpus[:50]
