"""Foreign test corpora: data from generators unrelated to privleak's own.

privleak's defences and attacks were developed against its synthetic
clinical-notes generator; these corpora come from a separate generator
(templates written for these domains, Faker for people and places, formats
looked up in public documentation) so tests and benchmarks can check that
nothing depends on the clinical corpus's quirks.

* :func:`build_pii_corpus`     multi-domain PII benchmark (seed 0 = reporting, 1 = development)
* :func:`build_email_corpus`   corporate mailbox with heavy duplication and authors
* :func:`build_shifted_corpus` two sources with clearly different styles
* :func:`build_domain_corpus`  support-chat transcripts with a house style, plus a public set
* :func:`build_forum_corpus`   hobby-forum posts: people with 1 to 200 posts, near duplicates, long texts

Records are dicts ``{"text", "pii": [[start, end, LABEL], ...], "meta"}``
with Presidio's entity names as labels; :func:`write_jsonl` writes them in
the JSONL form ``privleak`` reads.  ``python -m tests.corpora KIND --out F``
writes one from the command line.
"""

from .chat import build_domain_corpus
from .email import build_email_corpus
from .forum import build_forum_corpus
from .pii import DEVELOPMENT_SEED, REPORTING_SEED, build_pii_corpus
from .render import PRESIDIO_LABELS, write_jsonl
from .shifted import build_shifted_corpus

__all__ = [
    "PRESIDIO_LABELS", "REPORTING_SEED", "DEVELOPMENT_SEED", "build_pii_corpus", "build_email_corpus",
    "build_shifted_corpus", "build_domain_corpus", "build_forum_corpus", "write_jsonl",
]
