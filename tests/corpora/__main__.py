"""Write one foreign corpus as JSONL.

    python -m tests.corpora KIND --out FILE.jsonl [--n N] [--seed S]

KIND is one of:

  pii            the multi-domain PII corpus (n=3000; seed 0 = REPORTING, 1 = DEVELOPMENT)
  email          the corporate mailbox (n=2000; ``author`` also top-level)
  forum          the hobby forum, 1 to 200 posts a person (n=1500; ``author`` also top-level)
  shifted-a      source A of the shifted pair (n = records per source, 600)
  shifted-b      source B of the shifted pair
  domain         the private support-chat transcripts (n=2000)
  domain-public  the public transcripts (n = public records, 1500).  The
                 private set is rebuilt to keep the people disjoint: pass
                 --private-n >= the --n used for "domain" (default 2000)

Run from the repository root (``tests`` must be importable).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from .chat import build_domain_corpus
from .email import build_email_corpus
from .forum import build_forum_corpus
from .pii import build_pii_corpus
from .render import write_jsonl
from .shifted import build_shifted_corpus

# kind -> (default n, builder(n, seed, private_n) -> records, top-level fields)
KINDS: dict[str, tuple[int, Callable[[int, int, int], list[dict[str, Any]]], tuple[str, ...]]] = {
    "pii": (3000, lambda n, s, _: build_pii_corpus(n, s), ()),
    "email": (2000, lambda n, s, _: build_email_corpus(n, s), ("author",)),
    "forum": (1500, lambda n, s, _: build_forum_corpus(n, s), ("author",)),
    "shifted-a": (600, lambda n, s, _: build_shifted_corpus(n, s)[0], ()),
    "shifted-b": (600, lambda n, s, _: build_shifted_corpus(n, s)[1], ()),
    # The private set is drawn record by record before the public one, so a
    # smaller private set is a prefix of a larger one, and skipping the public
    # set (n_public=0) leaves the private one unchanged.
    "domain": (2000, lambda n, s, _: build_domain_corpus(n, 0, s)[0], ()),
    "domain-public": (1500, lambda n, s, pn: build_domain_corpus(pn, n, s)[1], ()),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.corpora", description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=sorted(KINDS))
    ap.add_argument("--out", required=True, help="JSONL file to write")
    ap.add_argument("--n", type=int, default=None, help="number of records (default: the corpus's default size)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--private-n", type=int, default=2000,
                    help="domain-public only: size of the private set its people must avoid (default 2000)")
    args = ap.parse_args(argv)
    default_n, build, top = KINDS[args.kind]
    n = default_n if args.n is None else args.n
    if n < 1:
        ap.error("--n must be at least 1")
    records = build(n, args.seed, args.private_n)
    path = write_jsonl(records, args.out, top_level=top)
    spans = sum(len(r["pii"]) for r in records)
    print(f"wrote {len(records)} {args.kind} records ({spans} PII spans, seed {args.seed}) to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
