"""The user's privacy requirement: the question the recommendation answers.

"Which arm meets my privacy requirement with the most utility?" needs the requirement stated. Two kinds:

* **formal** (the default): an accountant's bound — ε ≤ X per **person** (or per record) at the audit's δ (or
  a stated δ). The default, ε ≤ 10 per person, is tier 2 of Ponomareva et al. 2023 ("How to DP-fy ML", JAIR
  77): ε ≤ 10 is the widest range they still call a reasonable guarantee, and they count the person — not a
  line of text — as the unit a user is protected as. Only DP arms can meet it, from their accountant alone.
* **empirical** (asked for by name): upper confidence bounds on the measured leakage — membership AUC, the
  advantage TPR − FPR at 1 % and 0.1 % FPR, canary exposure, leak rates — below stated tolerances, for arms
  with no formal guarantee (scrubbing, deduplication, an output guard). It protects against the attacks run,
  not against every attacker.

Written in the config (``recommendation.require``) or on the command line (``--require``) as a mapping or a
phrase, matched case-insensitively::

    epsilon<=10 per person              ε ≤ 10 per person at the audit's δ (the default)
    epsilon<=1 per record at delta=1e-6
    empirical                           every tolerance at its default
    empirical: tpr@1%<=0.02, tpr@0.1%<=0.01, auc<=0.05, exposure<=1, rate<=0.05
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core import limits as L

#: Tier 2 of Ponomareva et al. 2023: the default formal requirement, per person.
DEFAULT_EPSILON = 10.0

_NUM = r"([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)"
_FORMAL = re.compile(r"^(?:epsilon|eps|ε)\s*(?:<=|≤|=<)\s*" + _NUM + r"(?:\s+per\s+(person|record))?"
                     r"(?:\s+at\s+(?:delta|δ)\s*=\s*" + _NUM + r")?$")
_TOLERANCES = {"tpr@1%": "tpr_at_1pct_fpr", "tpr@0.1%": "tpr_at_0_1pct_fpr", "auc": "auc", "exposure": "exposure_bits",
               "rate": "rate"}
HELP = ('a formal bound "epsilon<=10 per person" (or "per record", optionally "at delta=1e-6"), or "empirical" '
        'with optional tolerances, e.g. "empirical: tpr@1%<=0.02, tpr@0.1%<=0.01, auc<=0.05, exposure<=1, rate<=0.05"')


class Requirement(BaseModel):
    """A stated privacy requirement (module docstring). ``kind`` formal: ``epsilon`` per ``unit`` at ``delta``
    (None: the audit's δ). ``kind`` empirical: the tolerances — ``auc`` (excess membership AUC over the
    control), ``tpr_at_1pct_fpr`` / ``tpr_at_0_1pct_fpr`` (the advantage TPR − FPR at those FPRs), ``exposure_bits``
    (canary exposure above chance, in bits), ``rate`` (an extraction or PII count's rate above the control's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["formal", "empirical"] = "formal"
    epsilon: float = Field(DEFAULT_EPSILON, gt=0, le=L.MAX_EPSILON)
    unit: Literal["person", "record"] = "person"
    delta: float | None = Field(None, gt=0, lt=1)
    auc: float = Field(0.05, gt=0, lt=0.5)
    tpr_at_1pct_fpr: float = Field(0.02, gt=0, le=1)
    tpr_at_0_1pct_fpr: float = Field(0.01, gt=0, le=1)
    exposure_bits: float = Field(1.0, gt=0, le=64)
    rate: float = Field(0.05, gt=0, le=1)

    @model_validator(mode="before")
    @classmethod
    def _phrase(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_requirement(value)
        if isinstance(value, dict):
            return {k: (v.lower() if k in ("kind", "unit") and isinstance(v, str) else v) for k, v in value.items()}
        return value

    @property
    def formal(self) -> bool:
        return self.kind == "formal"

    def describe(self, delta: float | None = None) -> str:
        """The requirement in words, as the report's first line prints it (``delta``: the audit's δ)."""
        if self.formal:
            d = self.delta if self.delta is not None else delta
            at = f" at δ = {d:.2g}" if d is not None else " at the audit's δ"
            return f"a formal guarantee of ε ≤ {self.epsilon:g} per {self.unit}{at}, from the accountant"
        return ("measured leakage within tolerances — membership AUC within "
                f"{self.auc:g} of the control, advantage TPR − FPR below {self.tpr_at_1pct_fpr:g} at 1 % FPR and "
                f"{self.tpr_at_0_1pct_fpr:g} at 0.1 % FPR, canary exposure within {self.exposure_bits:g} bit"
                f"{'s' if self.exposure_bits != 1 else ''} of chance, leak rates at most {self.rate:g} above the "
                "control's — against the attacks run, not every attacker")

    def phrase(self) -> str:
        """The requirement as ``--require`` takes it back."""
        if self.formal:
            return f"epsilon<={self.epsilon:g} per {self.unit}" + (f" at delta={self.delta:g}" if self.delta else "")
        return ("empirical: " + ", ".join(f"{k}<={getattr(self, v):g}" for k, v in _TOLERANCES.items()))


def parse_requirement(text: str) -> dict[str, Any]:
    """A requirement phrase (module docstring) as the fields of :class:`Requirement`; ValueError naming what is
    wrong and the accepted forms."""
    s = " ".join(str(text).strip().lower().split())
    if not s:
        raise ValueError(f"empty requirement; give {HELP}")
    m = _FORMAL.match(s)
    if m:
        eps = float(m.group(1))
        if not (math.isfinite(eps) and eps > 0):
            raise ValueError(f"requirement {text!r}: ε must be a positive number")
        out: dict[str, Any] = {"kind": "formal", "epsilon": eps, "unit": m.group(2) or "person"}
        if m.group(3) is not None:
            out["delta"] = float(m.group(3))
        return out
    if s == "empirical" or s.startswith("empirical:") or s.startswith("empirical "):
        out = {"kind": "empirical"}
        rest = s[len("empirical"):].lstrip(": ").strip()
        for part in filter(None, (p.strip() for p in rest.split(","))):
            mm = re.match(r"^(tpr@1%|tpr@0\.1%|auc|exposure|rate)\s*(?:<=|≤|=<)\s*" + _NUM + "$", part)
            if not mm:
                raise ValueError(f"requirement {text!r}: cannot read {part!r}; tolerances are "
                                 f"{', '.join(k + '<=x' for k in _TOLERANCES)}")
            out[_TOLERANCES[mm.group(1)]] = float(mm.group(2))
        return out
    raise ValueError(f"requirement {text!r} is not understood; give {HELP}")
