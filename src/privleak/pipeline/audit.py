"""What the stages of one run share: the config, the run directory, loaded splits and models."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..config import AuditConfig
from ..core.io import read_json
from ..data.audit_canaries import AuditCanary, load_audit_canaries
from ..data.canaries import Canary, load_canaries
from ..data.records import Record, read_jsonl
from ..data.unlearning import ForgetSet, load_forget_set
from ..models.handle import ModelHandle, load_handle
from .rundir import RunDir, Timer

SPLITS = ("public", "public_heldout", "members", "non_members", "population")


@dataclass
class Audit:
    """One run in progress. ``shared`` memoises what stages of this process reuse (never persisted): every
    value in it is a pure function of the config and the run directory, so a worker process that rebuilds the
    Audit computes the same."""

    cfg: AuditConfig
    run: RunDir
    notify: Callable[[str], None]
    warnings: list[str] = field(default_factory=list)
    shared: dict[str, Any] = field(default_factory=dict)

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        if key not in self.shared:
            self.shared[key] = build()
        return self.shared[key]

    def splits(self) -> dict[str, list[Record]]:
        return self.memo("splits", lambda: {n: read_jsonl(self.run.path("splits", f"{n}.jsonl")) for n in SPLITS})

    def canaries(self) -> list[Canary]:
        return self.memo("canaries", lambda: load_canaries(self.run.path("splits", "canaries.json")))

    def audit_canaries(self) -> list[AuditCanary]:
        """The one-run audit's canaries (all m, with their inclusion bits); [] when off."""
        if not self.cfg.one_run.canaries:
            return []
        return self.memo("audit_canaries", lambda: load_audit_canaries(self.run.path("audit_canaries.json")))

    def forget_set(self) -> ForgetSet:
        """The unlearning arms' forget set (``splits/forget.json``, the forget-set stage's)."""
        return self.memo("forget_set", lambda: load_forget_set(self.run.path("splits", "forget.json")))

    def user_split(self) -> bool:
        """Whether the user drew the members and non-members (``privleak attack``: ``splits/origin.json``) rather
        than PrivLeak splitting one corpus at random."""
        return self.memo("user_split", lambda: self.run.path("splits", "origin.json").exists()
                         and read_json(self.run.path("splits", "origin.json")).get("drawn_by") == "user")

    def base_dir(self) -> str:
        return read_json(self.run.path("base_model.json"))["path"]

    def text_format(self) -> str:
        """How every model of this run is scored and prompted (models.batching): the run's own arms in PrivLeak's
        format; ``privleak attack`` resolves ``auto`` before the run starts."""
        fmt = self.cfg.model.text_format
        return "privleak" if fmt == "auto" else fmt

    def base(self) -> ModelHandle:
        """The base model (loaded once per process)."""
        def build() -> ModelHandle:
            handle = load_handle(self.base_dir(), self.cfg.model.max_length)
            handle.text_format = self.text_format()
            return handle
        return self.memo("base_handle", build)

    def stage(self, name: str, key: str, body: Callable[[], None]) -> None:
        """Run ``body`` unless the stage is done with the same key; mark it done after."""
        if self.run.done(name, key):
            self.notify(f"[dim]✓ {name} (cached)[/dim]")
            return
        self.notify(f"▶ {name}")
        with Timer() as t:
            body()
        self.run.mark(name, key, t.elapsed)
        self.notify(f"[green]✓ {name}[/green] ({t.elapsed:.1f} s)")

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
        self.notify(f"[yellow]warning:[/yellow] {message}")
