"""Scrubbing throughput and recall, three analysers in one run.

    python bench/bench_scrub.py [--n 1000] [--phi-fraction 0.5] [--seed 0]

Arms, all scrubbing the same synthetic clinical records (mask mode, the
identifying types NAME, EMAIL, SSN, PHONE, ADDRESS, DOB, MRN):

* ``privleak``: the full analyser (spaCy NER + Presidio + PrivLeak regexes);
* ``regex-only``: the same without NER (spaCy tokenizer only);
* ``plain-presidio``: what a Presidio user writes: ``NlpEngineProvider`` with
  the same spaCy model (full pipeline), Presidio's default English
  recognizers (with its e-mail recognizer swapped for the offline one, the
  only change needed to stay off the network) and ``AnonymizerEngine``.

Prints records/s per arm (construction excluded, a warm-up batch excluded),
the ratios ``privleak ÷ regex-only`` and ``privleak ÷ plain-presidio``
measured in the same run, and per-type recall / overall precision against
the generator's ground truth (span level, >= 50 % overlap).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("PRIVLEAK_PROGRESS", "0")

from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus  # noqa: E402
from privleak.defenses.pii import (  # noqa: E402
    DEFAULT_SCRUB_LABELS,
    ENTITY_TO_LABEL,
    Detection,
    PiiAnalyzer,
)
from privleak.defenses.scrub import Scrubber  # noqa: E402
from privleak.defenses.scrub_quality import evaluate_detections  # noqa: E402

WARMUP = 20


def _privleak_arm(ner: bool):
    t0 = time.perf_counter()
    analyzer = PiiAnalyzer(DEFAULT_SCRUB_LABELS, ner=ner)
    build = time.perf_counter() - t0

    def run(texts):
        scrubber = Scrubber(analyzer, mode="mask")
        dets = analyzer.analyze_batch(texts)
        out = [scrubber.apply(t, d).text for t, d in zip(texts, dets)]
        return out, dets

    return build, run


def _plain_presidio_arm():
    from presidio_analyzer import AnalyzerEngine, BatchAnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider
    from presidio_analyzer.recognizer_registry import RecognizerRegistry
    from presidio_anonymizer import AnonymizerEngine

    from privleak.defenses.pii import DEFAULT_SPACY_MODEL
    from privleak.defenses.pii.recognizers import OfflineEmailRecognizer

    t0 = time.perf_counter()
    # Presidio's shipped conf/default.yaml, with the small model instead of en_core_web_lg.
    provider = NlpEngineProvider(nlp_configuration={
        "nlp_engine_name": "spacy",
        "models": [{"lang_code": "en", "model_name": DEFAULT_SPACY_MODEL}],
        "ner_model_configuration": {
            "model_to_presidio_entity_mapping": {
                "PER": "PERSON", "PERSON": "PERSON", "NORP": "NRP", "FAC": "LOCATION", "LOC": "LOCATION",
                "GPE": "LOCATION", "LOCATION": "LOCATION", "ORG": "ORGANIZATION",
                "ORGANIZATION": "ORGANIZATION", "DATE": "DATE_TIME", "TIME": "DATE_TIME"},
            "low_confidence_score_multiplier": 0.4,
            "low_score_entity_names": [],
            "labels_to_ignore": ["ORGANIZATION", "CARDINAL", "EVENT", "LANGUAGE", "LAW", "MONEY",
                                 "ORDINAL", "PERCENT", "PRODUCT", "QUANTITY", "WORK_OF_ART"],
        },
    })
    engine = provider.create_engine()
    registry = RecognizerRegistry(supported_languages=["en"])
    registry.load_predefined_recognizers(languages=["en"], nlp_engine=engine)
    registry.remove_recognizer("EmailRecognizer")
    registry.add_recognizer(OfflineEmailRecognizer())
    analyzer = AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])
    batch = BatchAnalyzerEngine(analyzer)
    anonymizer = AnonymizerEngine()
    build = time.perf_counter() - t0
    wanted = {e for e, lab in ENTITY_TO_LABEL.items() if lab in DEFAULT_SCRUB_LABELS}

    def run(texts):
        results = batch.analyze_iterator(texts, language="en", batch_size=32)
        out, dets = [], []
        for text, res in zip(texts, results):
            out.append(anonymizer.anonymize(text=text, analyzer_results=res).text)
            dets.append([Detection(r.start, r.end, ENTITY_TO_LABEL[r.entity_type], r.score)
                         for r in res if r.entity_type in wanted])
        return out, dets

    return build, run


_FREE_FRAMES = (
    "The results were discussed with {} and her daughter.",
    "Yesterday {} went home early after the infusion.",
    "Nursing staff noted that {} refused breakfast again.",
    "Transport for {} is booked for Tuesday morning.",
    "We spoke to {} about stopping smoking.",
    "{} tolerated the procedure well.",
    "Family meeting held; {} wishes to go home.",
    "Physiotherapy reviewed {} on the ward.",
)


def _names_without_cues(n: int, seed: int):
    """Sentences with a name in free text (no "Patient", no "DOB" next to it):
    where regexes cannot help and NER has to."""
    import random

    from faker import Faker

    from privleak.data.records import PiiSpan, Record

    fake = Faker("en_US")
    fake.seed_instance(seed + 17)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        name = f"{fake.first_name()} {fake.last_name()}"
        frame = rng.choice(_FREE_FRAMES)
        start = frame.index("{}")
        out.append(Record(frame.format(name), pii=[PiiSpan(start, start + len(name), "NAME")]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="records to scrub (default 1000)")
    ap.add_argument("--phi-fraction", type=float, default=0.5,
                    help="fraction of patient notes; the rest is PHI-free generic text (default 0.5)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)

    cfg = ClinicalCorpusConfig(n_public=args.n + WARMUP, n_members=0, n_non_members=0, n_population=0,
                               public_phi_fraction=args.phi_fraction, canary_repeats=(), seed=args.seed)
    records = generate_corpus(cfg).splits["public"]
    warm, records = records[:WARMUP], records[WARMUP:]
    texts = [r.text for r in records]
    free = _names_without_cues(200, args.seed)
    n_phi = sum(r.kind == "phi" for r in records)
    print(f"bench_scrub: {len(records)} records ({n_phi} patient notes), mean {sum(map(len, texts)) / len(texts):.0f} "
          f"chars, seed {args.seed}, cpu threads {os.cpu_count()}")

    arms = {"privleak": lambda: _privleak_arm(True), "regex-only": lambda: _privleak_arm(False),
            "plain-presidio": _plain_presidio_arm}
    rate: dict[str, float] = {}
    rows = []
    for name, make in arms.items():
        build, run = make()
        run([r.text for r in warm])
        t0 = time.perf_counter()
        _, dets = run(texts)
        elapsed = time.perf_counter() - t0
        rate[name] = len(texts) / elapsed
        q = evaluate_detections(records, dets, DEFAULT_SCRUB_LABELS)
        _, free_dets = run([r.text for r in free])
        free_recall = evaluate_detections(free, free_dets, ["NAME"]).per_type["NAME"].recall
        rows.append((name, build, rate[name], q, free_recall))

    labels = DEFAULT_SCRUB_LABELS
    print()
    print(f"{'arm':15s} {'build s':>7s} {'rec/s':>7s} " + " ".join(f"{lab[:7]:>7s}" for lab in labels)
          + f" {'prec':>6s} {'free NAME':>9s}")
    for name, build, r, q, free_recall in rows:
        recalls = " ".join(f"{q.per_type[lab].recall:7.3f}" for lab in labels)
        print(f"{name:15s} {build:7.1f} {r:7.1f} {recalls} {q.overall.precision:6.3f} {free_recall:9.3f}")
    print("(recall per type and overall precision on the clinical notes, span level, >= 50 % overlap;")
    print(" 'free NAME': name recall on 200 free-text sentences with no cue word next to the name;")
    print(" 'build s' of the first arm includes importing Presidio, spaCy and their dependencies)")
    print()
    print(f"throughput ratio privleak / regex-only     = {rate['privleak'] / rate['regex-only']:.3f}")
    print(f"throughput ratio privleak / plain-presidio = {rate['privleak'] / rate['plain-presidio']:.3f}")


if __name__ == "__main__":
    main()
