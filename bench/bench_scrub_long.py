"""``privleak scrub`` on one long record: time against length (is it linear?), and the refusal of a huge one.

    python bench/bench_scrub_long.py [--sizes 100000,300000,1000000] [--no-ner] [--huge 10800000]

Each size is one line of PII-dense patient notes (the synthetic clinical generator, every note a PHI note)
scrubbed in mask mode through :func:`privleak.defenses.commands.scrub_file` — the command's own path: read,
analyse in overlapping windows, splice, write — with one analyser built beforehand (its set-up excluded).
Prints seconds and characters per second per size and the ratio of the largest size's rate to the smallest's
(1.0: linear; a quadratic path would give about smallest ÷ largest); then how long the default
``--max-record-chars`` takes to refuse a ``--huge``-character line (the probe's 10.8 MB), which must be before
any analysis. The last line (``RESULT``) carries the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("PRIVLEAK_PROGRESS", "0")

from privleak.core.errors import UserError  # noqa: E402
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus  # noqa: E402
from privleak.defenses.commands import scrub_file  # noqa: E402
from privleak.defenses.pii import PiiAnalyzer  # noqa: E402


def _line(n: int, notes: list[str]) -> str:
    out, i, size = [], 0, 0
    while size < n:
        out.append(notes[i % len(notes)].replace("\n", " "))
        size += len(out[-1]) + 1
        i += 1
    return " ".join(out)[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,300000,1000000")
    ap.add_argument("--no-ner", action="store_true")
    ap.add_argument("--huge", type=int, default=10_800_000)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=5, n_members=5, n_non_members=800, n_population=5,
                                                  phi_fraction=1.0, seed=3))
    notes = [r.text for r in corpus.splits["non_members"]]
    t = time.perf_counter()
    analyzer = PiiAnalyzer(None, ner=not args.no_ner)
    analyzer.analyze("warm up John Smith 617-555-0142")
    print(f"analyser ({'regex only' if args.no_ner else 'spaCy NER + regex'}) built in {time.perf_counter() - t:.1f} s")
    rates = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            src = Path(tmp) / f"in-{n}.txt"
            src.write_text(_line(n, notes) + "\n")
            rep = scrub_file(src, Path(tmp) / f"out-{n}.txt", mode="mask", analyzer=analyzer,
                             max_record_chars=max(sizes))
            rates.append(n / rep.seconds)
            print(f"{n:>10,} characters: {rep.seconds:7.1f} s, {rates[-1]:8,.0f} characters/s, "
                  f"{sum(rep.counts.values()):,} values replaced")
        huge = Path(tmp) / "huge.txt"
        huge.write_text(_line(args.huge, notes) + "\n")
        t = time.perf_counter()
        try:
            scrub_file(huge, Path(tmp) / "huge-out.txt", mode="mask", analyzer=analyzer)
            refused = "not refused"
        except UserError as exc:
            refused = str(exc)
        refuse_s = time.perf_counter() - t
        leftovers = [p.name for p in Path(tmp).iterdir() if p.name.startswith(".")]
    print(f"{args.huge:,}-character line: refused in {refuse_s:.2f} s: {refused}")
    print(f"RESULT rate_small={rates[0]:.0f}/s rate_large={rates[-1]:.0f}/s linearity={rates[-1] / rates[0]:.2f} "
          f"(1.0 linear; quadratic ≈ {sizes[0] / sizes[-1]:.2f}) refuse_huge={refuse_s:.2f}s leftovers={len(leftovers)}")


if __name__ == "__main__":
    main()
