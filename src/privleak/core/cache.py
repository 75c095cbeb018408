"""Where PrivLeak keeps what it can rebuild: the model cache (pre-trained bases, trained arms, converted GGUF
files, calibrated σ, the budget ledger). ``PRIVLEAK_CACHE`` moves it; the default is ``~/.cache/privleak``."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    env = os.environ.get("PRIVLEAK_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "privleak"
