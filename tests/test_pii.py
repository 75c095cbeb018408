"""The shared PII analyser: recall targets, offline construction, variants, overlaps."""

from __future__ import annotations

import logging
import math
import os
import pickle
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from privleak.core.errors import UserError
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.defenses.pii import (
    DEFAULT_SCRUB_LABELS,
    Detection,
    PiiAnalyzer,
    get_analyzer,
    offline_tld_extractor,
    resolve_overlaps,
)
from privleak.defenses.scrub_quality import evaluate_detections, match_spans

# The types the clinical generator annotates (its ground truth knows nothing of
# nationalities or clock times, so other types' precision is not measurable here).
CLINICAL_LABELS = ("NAME", "EMAIL", "SSN", "PHONE", "ADDRESS", "DOB", "MRN")
EVAL_LABELS = CLINICAL_LABELS + ("BLOOD_PRESSURE", "HEIGHT", "WEIGHT")


@pytest.fixture(scope="module")
def analyzer() -> PiiAnalyzer:
    return get_analyzer(EVAL_LABELS)


@pytest.fixture(scope="module")
def phi_records():
    # 300 notes about synthetic patients, exact ground-truth spans.
    cfg = ClinicalCorpusConfig(n_public=10, n_members=300, n_non_members=0, n_population=0,
                               phi_fraction=1.0, canary_repeats=(), seed=11)
    records = generate_corpus(cfg).splits["members"]
    assert len(records) == 300 and all(r.kind == "phi" for r in records)
    return records


@pytest.fixture(scope="module")
def quality(analyzer, phi_records):
    dets = analyzer.analyze_batch([r.text for r in phi_records])
    return evaluate_detections(phi_records, dets, EVAL_LABELS)


@pytest.mark.parametrize("label,target", [
    ("EMAIL", 0.95), ("PHONE", 0.95), ("SSN", 0.95), ("MRN", 0.95), ("NAME", 0.85),
    ("ADDRESS", 0.90), ("DOB", 0.90),
])
def test_recall_targets_on_synthetic_corpus(quality, label, target):
    q = quality.per_type[label]
    assert q.support > 50
    assert q.recall >= target, f"{label} recall {q.recall:.3f} < {target}\n{quality.table()}"


def test_precision_and_overall(quality):
    assert quality.overall.precision >= 0.95, quality.table()
    assert quality.overall.recall >= 0.95, quality.table()
    for label, q in quality.per_type.items():
        assert q.precision >= 0.9, f"{label}\n{quality.table()}"
    # exact-match figures are reported too and can only be lower
    assert quality.overall.exact_recall <= quality.overall.recall
    d = quality.to_dict()
    assert set(d["per_type"]) == set(EVAL_LABELS) and "f1" in d["overall"]


def test_structured_variants(analyzer):
    cases = {
        "Call 555.867.5309 x204 or +1 (415) 555-0199 today.": [
            ("555.867.5309 x204", "PHONE"), ("+1 (415) 555-0199", "PHONE")],
        "SSN: 123 45 6789 on file.": [("123 45 6789", "SSN")],
        "Her social security number is 123456789.": [("123456789", "SSN")],
        "Her MRN: 00123456; old chart MRN 654321.": [("MRN: 00123456", "MRN"), ("MRN 654321", "MRN")],
        "Send to 1600 Pennsylvania Avenue NW, Washington, DC 20500 today.": [
            ("1600 Pennsylvania Avenue NW, Washington, DC 20500", "ADDRESS")],
        "Lives at 12 Oak St. Apt 4B, Springfield, IL 62704.": [
            ("12 Oak St. Apt 4B, Springfield, IL 62704", "ADDRESS")],
        "She was born on March 3, 1970; DOB 1970-03-03.": [("March 3, 1970", "DOB"), ("1970-03-03", "DOB")],
        "Dear Dr. Okafor, thank you for seeing Mrs. Li.": [("Okafor", "NAME"), ("Li", "NAME")],
        "email: Jane.Doe@hospital.org": [("Jane.Doe@hospital.org", "EMAIL")],
    }
    for text, expected in cases.items():
        got = [(d.value(text), d.label) for d in analyzer.analyze(text)]
        for item in expected:
            assert item in got, f"{text!r}: expected {item}, got {got}"
    # no context word, no SSN: a bare nine-digit lot number stays
    assert analyzer.analyze("Lot number 123456789 expires in 2 weeks.") == []
    assert analyzer.analyze("The 12 patients took 500 mg twice daily.") == []


def test_analyze_batch_matches_single(analyzer, phi_records):
    texts = [r.text for r in phi_records[:5]] + [""]
    batch = analyzer.analyze_batch(texts)
    assert batch[-1] == []
    assert batch[:5] == [analyzer.analyze(t) for t in texts[:5]]


def test_no_network_and_no_warnings(monkeypatch, caplog, tmp_path):
    attempts: list[str] = []

    def deny(*args, **kwargs):
        attempts.append(repr(args[:2]))
        raise OSError("network access attempted during a test")

    monkeypatch.setattr(socket.socket, "connect", deny)
    monkeypatch.setattr(socket.socket, "connect_ex", deny)
    monkeypatch.setattr(socket, "create_connection", deny)
    monkeypatch.setattr(socket, "getaddrinfo", deny)
    offline_tld_extractor.cache_clear()  # rebuilt below, under the guard
    caplog.set_level(logging.DEBUG)
    text = ("Mail jane.doe@example.co.uk or see https://example.org/x; John Smith, "
            "SSN 123-45-6789, phone (555) 234-5678, 12 Oak St, Springfield, IL 62704.")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fresh = PiiAnalyzer(DEFAULT_SCRUB_LABELS + ("URL",))  # construction under the guard
        dets = fresh.analyze(text)
    assert attempts == []
    assert [str(w.message) for w in caught] == []
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [], [r.getMessage() for r in loud]
    labels = {d.label for d in dets}
    assert {"EMAIL", "URL", "NAME", "SSN", "PHONE", "ADDRESS"} <= labels  # the e-mail check ran offline

    # The guard is real: tldextract's default extractor does try the network.
    import tldextract

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tldextract.TLDExtract(cache_dir=str(tmp_path / "tld"))("a.example.com")
    assert attempts, "the socket guard did not see tldextract's default fetch"


def test_missing_model_is_a_user_error_and_never_downloads(monkeypatch):
    import spacy.cli

    def no_download(*a, **k):
        raise AssertionError("tried to download a spaCy model")

    monkeypatch.setattr(spacy.cli, "download", no_download)
    with pytest.raises(UserError, match="pip install en-core-web-nothere"):
        PiiAnalyzer(["NAME"], model="en_core_web_nothere")


def test_unknown_label_and_regex_only_mode():
    with pytest.raises(UserError, match="unknown PII type"):
        PiiAnalyzer(["NAME", "SHOE_SIZE"], ner=False)
    with pytest.raises(UserError, match="term list"):
        PiiAnalyzer(["CONDITION"], ner=False)
    a = PiiAnalyzer(["PERSON", "EMAIL_ADDRESS", "CONDITION"], ner=False, terms={"CONDITION": ["asthma"]})
    assert a.labels == ("NAME", "EMAIL", "CONDITION") and not a.ner
    text = "Patient Ann Lee has asthma; write to ann.lee@example.com."
    got = [(d.value(text), d.label) for d in a.analyze(text)]
    assert got == [("Ann Lee", "NAME"), ("asthma", "CONDITION"), ("ann.lee@example.com", "EMAIL")]


def test_resolve_overlaps_is_deterministic():
    ner = "SpacyRecognizer"
    dets = [
        Detection(0, 10, "DOB", 0.6, "privleak_dob"),
        Detection(12, 22, "MRN", 0.9, "privleak_mrn"),
        Detection(0, 22, "DOB", 0.85, ner),  # fuzzy NER span over both: dropped
        Detection(30, 40, "PHONE", 0.4, "PhoneRecognizer"),
        Detection(28, 40, "PHONE", 0.7, "privleak_phone"),  # longer pattern wins, union kept
        Detection(35, 45, "SSN", 0.9, "privleak_ssn"),  # overlaps the phone cluster: merged into it
        Detection(50, 60, "NAME", 0.85, ner),
        Detection(55, 58, "ADDRESS", 0.85, ner),
    ]
    want = [Detection(0, 10, "DOB", 0.6, "privleak_dob"), Detection(12, 22, "MRN", 0.9, "privleak_mrn"),
            Detection(28, 45, "PHONE", 0.9, "privleak_phone"), Detection(50, 60, "NAME", 0.85, ner)]
    assert resolve_overlaps(dets) == want
    assert resolve_overlaps(list(reversed(dets))) == want


def test_match_spans_fifty_percent_rule():
    truth = [(0, 10, "NAME")]
    assert match_spans(truth, [(0, 5, "NAME")], "NAME") == (1, 1, 0)  # 5/10 covered: caught
    assert match_spans(truth, [(0, 4, "NAME")], "NAME") == (0, 1, 0)  # 4/10: missed, but correct
    assert match_spans(truth, [(0, 20, "NAME")], "NAME") == (1, 1, 0)  # 10/20 of the detection inside
    assert match_spans(truth, [(0, 21, "NAME")], "NAME") == (1, 0, 0)  # < half inside: wrong
    assert match_spans(truth, [(0, 3, "NAME"), (3, 6, "NAME")], "NAME") == (1, 2, 0)  # union counts
    assert match_spans(truth, [(0, 10, "PHONE")], "NAME") == (0, 0, 0)  # incompatible type
    assert match_spans(truth, [(0, 10, "NAME")], "NAME") == (1, 1, 1)
    assert math.isnan(evaluate_detections([], [], ["NAME"]).overall.recall)


def test_nhs_check_digit_beats_a_phone_format_unless_a_phone_cue_is_nearer():
    # 943 476 5919 is the NHS Data Dictionary's example number (mod-11 check digit 9);
    # 943 476 5918 has the wrong check digit, so it can only be a phone number.
    a = get_analyzer(["PHONE", "UK_NHS"], ner=False)

    def labels(text):
        return [(d.value(text), d.label) for d in a.analyze(text)]

    assert labels("Form returned, 943 476 5919 confirmed against the GP letter.") == [("943 476 5919", "UK_NHS")]
    assert labels("Form returned, 943 476 5918 confirmed against the GP letter.") == [("943 476 5918", "PHONE")]
    assert labels("Call me on 943 476 5919 tomorrow.") == [("943 476 5919", "PHONE")]
    assert labels("Reach me on +44 943 476 5919 tomorrow.") == [("+44 943 476 5919", "PHONE")]
    assert labels("NHS no. 943 476 5919; call 0161 496 0000.") == [("943 476 5919", "UK_NHS"),
                                                                    ("0161 496 0000", "PHONE")]
    assert labels("Form returned, 943-476-5919 confirmed.") == [("943-476-5919", "UK_NHS")]
    # after a trunk 0 (a French mobile, mod-11 valid) the check digit alone proves nothing: one in eleven pass
    assert labels("Form returned, 0612345688 confirmed.") == [("0612345688", "PHONE")]
    assert labels("Form returned, NHS 0612345688 confirmed.") == [("0612345688", "UK_NHS")]


def test_bank_context_words_survive_inflection_glue_and_one_typo():
    # The lean NLP engine's lemmas are the lower-cased tokens: plurals, a cue glued to its
    # value and a chat typo must still support a bank number, as Presidio's lemmatizer and
    # substring matching made them; an unrelated word one letter away must not.
    a = get_analyzer(["US_BANK_NUMBER", "PHONE", "CREDIT_CARD", "UK_NHS"], ner=False)

    def labels(text):
        return [(d.value(text), d.label) for d in a.analyze(text)]

    for text, value in [("Both savings accounts: 40937659 and more.", "40937659"),
                        ("Acct#40937659 is the one for the rent.", "40937659"),
                        ("accct 40937659 thats the one for the rent", "40937659"),
                        ("actc 1357343759 thats the one for the rent", "1357343759"),
                        ("acount 40937659 thats the one for the rent", "40937659"),
                        ("Chequing 40937659 is closed.", "40937659")]:
        assert labels(text) == [(value, "US_BANK_NUMBER")], text
    assert labels("The act 40937659 was passed.") == []
    assert labels("Lot 40937659 shipped on time.") == []


def test_bank_number_after_a_short_form_of_account():
    # Banks and their customers shorten "account" to "A/C", "Acc" and, typing fast, "act"
    # ("acct" with a c dropped). Each of those is also a word or another abbreviation
    # ("air con", "the act"), so it counts only directly before the number, the noun "act"
    # (after an article) never; a phone-shaped number there is still the account.
    a = get_analyzer(["US_BANK_NUMBER", "PHONE", "CREDIT_CARD", "UK_NHS"], ner=False)

    def labels(text):
        return [(d.value(text), d.label) for d in a.analyze(text)]

    for text, value in [("act 53855430176592 thats the one for the rent", "53855430176592"),
                        ("😂 act 508121863028 thats the one for the rent 😅", "508121863028"),
                        ("Please credit A/C No. 40937659 by Friday.", "40937659"),
                        ("a/c: 40937659", "40937659"),
                        ("pay it into my acc 40937659 pls", "40937659"),
                        ("Acc#07700900123 is mine", "07700900123")]:
        assert labels(text) == [(value, "US_BANK_NUMBER")], text
    assert labels("The act 40937659 was passed.") == []
    assert labels("This act 40937659 was repealed.") == []
    assert labels("Act now, the number is 40937659 for the draw.") == []
    assert labels("The act, call 07700 900123 for help.") == [("07700 900123", "PHONE")]


@pytest.mark.parametrize("text,name", [
    ("Can you send a corrected copy?\n\nThanks,\nHelen", "Helen"),  # sign-off, not a partner list
    ("Statement for Nicolaus Werner\nMohauptstr. 5/7, 33036 Merseburg", "Nicolaus Werner"),  # one line per name
    ("The interview raised concerns about remarks on Bridget's background.", "Bridget"),  # possessive
    ("Hi all,\n\nBeverley Jackson 07910 874204", "Beverley Jackson"),  # a surname that is a word
    ("Franscini J: The appellant, a practising Lutheran, appeals.", "Franscini"),  # a judge
    ("Tessa has exceeded expectations on every objective.", "Tessa"),  # a sentence's subject
    ("dont tell christine but im quitting tomorrow", "christine"),  # a lower-case chat line
    ("pls send it to liam van den berg today", "liam van den berg"),
])
def test_names_in_general_positions(text, name):
    a = get_analyzer(["NAME", "ADDRESS", "PHONE", "NRP"])
    got = [(d.value(text), d.label) for d in a.analyze(text)]
    assert (name, "NAME") in got, got


@pytest.mark.parametrize("text", [
    "Loan application: applicant pending review.",  # a common word at a sentence start
    "ur austrian friend was so nice at the party",  # a common word in a lower-case line
    "Appendix J: the figures for 2023.",  # a lettered item, not a judge
])
def test_common_words_are_not_names(text):
    a = get_analyzer(["NAME", "ADDRESS", "PHONE", "NRP"])
    assert [d.value(text) for d in a.analyze(text) if d.label == "NAME"] == []


def test_stock_presidio_still_loads_its_recognizers_after_ours(analyzer):
    # Presidio's loader looks recognizer classes up by name among the EntityRecognizer subclasses that
    # exist in the process; ours must not shadow a predefined one (it crashed with our PhoneRecognizer).
    from presidio_analyzer.recognizer_registry import RecognizerRegistry

    assert analyzer.analyze(["Call 212-555-0147 today."])  # ours built and used first
    registry = RecognizerRegistry(supported_languages=["en"])
    registry.load_predefined_recognizers(languages=["en"])
    assert any(r.name == "PhoneRecognizer" for r in registry.recognizers)


def test_a_decilitre_unit_is_no_driver_licence_cue():
    analyzer = get_analyzer(None)  # the default scrub set (the module's analyser has no licence type)
    # "mg/dL" lower-cases to the "dl" context word; on the default clinical corpus it made doses and
    # addresses near a lab value "licence numbers". The abbreviation is written "DL".
    text = ("Last creatinine 1.1 mg/dL. D/c meds: venlafaxine 250 mg at bedtime. Last hemoglobin 10.3 g/dL. "
            "Deliver: 15365 Gray Wall Apt. 629, East Elizabethhaven, UT 84152 | Tel 746-209-6139")
    dets = analyzer.analyze(text)
    assert not [d for d in dets if d.label == "US_DRIVER_LICENSE"]
    assert any(d.label == "ADDRESS" and "15365 Gray Wall" in text[d.start:d.end] for d in dets)
    text = "Defendant Ann Lee (CA DL No. D1234567) was arrested in Fresno."
    assert any(d.label == "US_DRIVER_LICENSE" and text[d.start:d.end] == "D1234567" for d in analyzer.analyze(text))


def test_recognizers_are_module_level_classes_that_pickle():
    # Presidio's loader resolves recognizer classes by name among the importable subclasses; ours are
    # module-level (a class defined inside a factory function can be neither imported nor pickled).
    analyzer = get_analyzer(None)  # the default scrub set: names, NRP, phones, e-mail, cards
    ours = [r for r in analyzer._engine.registry.recognizers if type(r).__module__.startswith("privleak.")]
    assert {type(r).__name__ for r in ours} >= {"NameListRecognizer", "PrivLeakPhoneRecognizer",
                                                 "OfflineEmailRecognizer", "ValidatingPatternRecognizer"}
    text = "Dear Ann Lee, call +44 20 7946 0958 or mail ann.lee@example.com; card 4111 1111 1111 1111."
    for rec in ours:
        copy = pickle.loads(pickle.dumps(rec))
        assert type(copy) is type(rec)
        assert [(r.start, r.end, r.score) for r in copy.analyze(text, copy.supported_entities)] == \
            [(r.start, r.end, r.score) for r in rec.analyze(text, rec.supported_entities)]


def test_a_bad_pii_type_is_refused_before_presidio_or_spacy_is_imported():
    code = ("import sys\n"
            "from privleak.core.errors import UserError\n"
            "from privleak.defenses.pii import PiiAnalyzer\n"
            "try:\n    PiiAnalyzer('NAME,BOGUS')\nexcept UserError as e:\n    print('refused:', e)\n"
            "print(sorted(m for m in ('spacy', 'presidio_analyzer', 'faker') if m in sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "refused: unknown PII type 'BOGUS'" in out.stdout
    assert out.stdout.rstrip().endswith("[]"), out.stdout


def test_stop_words_loaded_without_their_language_packages_are_spacys():
    """The name lists' stop words come from spaCy's word-list files loaded alone (importing
    ``spacy.lang.fr`` compiles its tokenizer exceptions for seconds): the very same words."""
    import importlib

    from privleak.defenses.pii import names

    langs = ("en", "fr", "pt")
    fast = names._stop_words(langs)
    reference = set()
    for lang in langs:
        reference |= importlib.import_module(f"spacy.lang.{lang}.stop_words").STOP_WORDS
    assert fast == frozenset(w.casefold() for w in reference) and len(fast) > 500
