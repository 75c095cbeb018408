"""The typed blocks of the bounds an audit draws from attack scores: the empirical ε of the membership scores'
ROC (Jagielski et al. 2020; Nasr et al. 2023) and the one-run audit's bounds (Steinke, Nasr & Jagielski 2023;
Mahloujifar, Melis & Chaudhuri 2025). Computed in :mod:`privleak.audit`; kept here, below the results, as the
attacks' and the data defences' blocks are kept beside their code (``results`` re-exports every name)."""

from __future__ import annotations

from ..core.typed import Delta, Epsilon, Probability, Typed


class EmpiricalEpsilonBound(Typed):
    """One attack's ε lower bound (:func:`privleak.audit.epsilon.empirical_epsilon`)."""

    epsilon_lb: Epsilon
    threshold: float | None
    test: str
    tpr_lo: Probability
    fpr_hi: Probability
    k_p_eval: int
    k_q_eval: int
    n_pos_eval: int
    n_neg_eval: int
    n_pos_select: int
    n_neg_select: int
    epsilon_select: float | None
    delta: Delta
    alpha: Probability
    per_bound_alpha: Probability
    notes: list[str] = []


class RocBand(Typed):
    """The chosen attack's held-out ROC curve against the units' (ε, δ) with one simultaneous DKW band
    (:func:`privleak.audit.epsilon.roc_band_check`): a diagnostic (it assumes independent draws)."""

    attack: str
    epsilon: Epsilon
    delta: Delta
    unit_records: int
    alpha: Probability
    p_value: Probability
    n_pos: int
    n_neg: int
    half_widths: tuple[float, float]
    worst_threshold: float | None
    worst_inequality: str
    worst_fpr: Probability
    worst_tpr: Probability
    violated: bool


class EmpiricalEpsilon(Typed):
    """The arm's empirical ε: the attack chosen on a selection half, its bound on the other half."""

    epsilon_lb: Epsilon
    attack: str
    alpha: Probability
    delta: Delta
    procedure: str
    strongest_attack_by_auc: str
    roc_band: RocBand | None = None
    by_attack: dict[str, EmpiricalEpsilonBound]


class OneRunCandidate(Typed):
    """One guess count of the one-run audit: k_in top guesses "in", k_out bottom guesses "out"."""

    k_in: int
    k_out: int
    guesses: int
    correct: int
    epsilon_steinke: Epsilon
    mu_gdp_lb: float | None = None


class ReconstructionCandidate(Typed):
    """One guess count of the reconstruction game: the ``guesses`` most confident decoded secrets, ``correct``
    of them right (every word)."""

    guesses: int
    correct: int


class OneRunReconstruction(Typed):
    """The reconstruction (k-ary) game on the included audit canaries (attacks/one_run_canaries.py): each
    secret is one of k = ``pool_size`` ** ``secret_words`` values, drawn uniformly; the model alone decodes
    it; ``candidates``: the fixed grid of guess counts by confidence (``audit.one_run.reconstruction_grid``).
    Which claim the counts refute is decided with the other alarm routes (:mod:`privleak.audit.alarms`)."""

    m: int  # canaries in the game: the included ones
    pool_size: int
    secret_words: int
    k: float
    reconstructed: int  # of the m, secrets decoded exactly
    candidates: list[ReconstructionCandidate] = []


class OneRunEpsilon(Typed):
    """The one-run ε lower bounds of one model from its audit canaries (audit/one_run.py).

    ``epsilon_steinke``: Steinke, Nasr & Jagielski 2023 — an ε lower bound valid for any (ε, δ)-DP
    training, the figure checked against the accountant. ``mu_gdp_lb``: Mahloujifar, Melis & Chaudhuri
    2024 — a lower bound on the μ of μ-Gaussian DP (it refutes "the training is μ-GDP", a stronger claim
    than (ε, δ)-DP), never an ε: read it against the μ the DP-SGD run implies
    (:func:`privleak.audit.one_run.dpsgd_mu_clt`). Both are maxima over a fixed grid of guess counts at
    α / |grid| each. ``available`` false: no bound, and ``reason`` says why.
    """

    available: bool
    reason: str = ""
    epsilon_steinke: Epsilon | None = None
    mu_gdp_lb: float | None = None
    m: int = 0
    n_included: int = 0
    score: str = ""
    alpha: Probability = 0.05
    alpha_each: Probability | None = None
    delta: Delta = 0.0
    best: OneRunCandidate | None = None
    candidates: list[OneRunCandidate] = []
    canary_auc: Probability | None = None  # included vs left-out canaries' scores (a diagnostic; the bound counts guesses)
    reconstruction: OneRunReconstruction | None = None  # the k-ary game (None: not played, e.g. a guarded model)
