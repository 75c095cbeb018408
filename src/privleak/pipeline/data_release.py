"""The release stage: the members' data summary under central DP and their frequent terms under local DP."""

from __future__ import annotations

from typing import Any

from ..attacks.inputs import SPLITS
from ..config import AuditConfig, resolve_delta
from ..core.inputs import Input, Persist, View, provides
from ..core.io import read_json, stable_hash, write_json
from ..data.canaries import derive_seed
from ..defenses.ldp_terms import discover, document_frequency, record_terms
from ..defenses.release import release_summary, released_mean

#: What the audit publishes about the members (``release.json``), where the config asks for a release.
RELEASE: Input[dict[str, Any]] = Input("release", "the members' data summary under central DP and their frequent "
                                                  "terms under local DP (release.json)")

_IDENTIFIERS = ("NAME", "EMAIL", "ADDRESS", "MRN", "SSN", "PHONE", "DOB")


def release_key(cfg: AuditConfig, data_key: str) -> str:
    return stable_hash("release", data_key, cfg.release.model_dump(mode="json"), cfg.dp.delta, cfg.seed)


def released(cfg: AuditConfig) -> bool:
    return cfg.release.summary_epsilon is not None or cfg.release.ldp_terms_epsilon is not None


@provides(RELEASE, needs=(SPLITS,), when=lambda w: released(w.cfg), key_formula=lambda k: release_key(k.cfg, k.key(SPLITS)),
          persist=Persist("release", ("release.json",), load=lambda view: read_json(view.path("release.json"))))
def _release(view: View) -> None:
    release_stage(view.cfg, view.resolver.store, view[SPLITS])


def release_stage(cfg: AuditConfig, run: Any, splits: dict[str, list]) -> None:
    """``release.json``: what the audit publishes about the members, each part with the ε it spent."""
    members = splits["members"]
    rel = cfg.release
    out: dict = {"summary": None, "ldp_terms": None}
    if rel.summary_epsilon is not None:
        delta, _ = resolve_delta(cfg, len(members))
        s = release_summary(members, rel.summary_epsilon, delta, derive_seed(cfg.seed, "dp-summary"),
                            bp_range=tuple(rel.bp_range))
        out["summary"] = {**s.to_dict(), "systolic_mean": released_mean(s)}
    if rel.ldp_terms_epsilon is not None:
        # Candidates come from public text only: the server must never need private text to ask its question.
        # Words inside the public notes' identifier spans (names, e-mails, addresses, …) are not asked about:
        # a listed first name or street would read as a person, whatever the privacy of its count.
        public = splits["public"]
        identifying = {w for r in public for sp in (r.pii or []) if sp.label in _IDENTIFIERS
                       for w in record_terms(sp.value(r.text))}
        candidates = sorted(set(document_frequency([r.text for r in public], 1)) - identifying)
        found = discover([r.text for r in members if r.kind != "canary"], candidates, rel.ldp_terms_epsilon,
                         method=rel.ldp_method, top_n=rel.ldp_top, k=rel.ldp_k, m=rel.ldp_m,
                         seed=derive_seed(cfg.seed, "ldp-terms"))
        out["ldp_terms"] = found.to_dict()
    out["epsilon_total"] = (rel.summary_epsilon or 0.0) + (rel.ldp_terms_epsilon or 0.0)
    write_json(run.path("release.json"), out)
