"""The blind baseline: can members be told from non-members without the model?

Das, Zhang & Tramèr (2024, "Blind baselines beat membership inference
attacks for foundation models") and Duan et al. (2024) show that on many
MIA benchmarks members and non-members differ in distribution (time,
source, formatting), so a classifier that never queries the model
separates them as well as published attacks. A membership AUC means
memorisation only if such a classifier cannot do the same on the same sets.

Here: bag of word uni/bigrams and character 2–4-grams (TF-IDF), logistic
regression, 5-fold stratified cross-validation (seeded); every text is
scored by the fold model that did not see it, and those out-of-fold scores
give the AUC and TPR at 1 % FPR with the same bootstrap CIs as the attacks.

:func:`rivals` is the rule for "it rivals the attacks": the blind AUC is
above 0.55 and within :data:`RIVAL_MARGIN` of the best attack's AUC (or its
95 % CI lies wholly above 0.55 — a shifted split whatever the attacks do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..core.metrics import mia_metrics

#: The blind AUC "rivals" an attack's when it is within this of it (and above CHANCE_BAND).
RIVAL_MARGIN = 0.05
#: Blind AUCs up to this are treated as chance level.
CHANCE_BAND = 0.55
RULE = (f"the blind classifier rivals the attacks when its AUC is above {CHANCE_BAND} and within {RIVAL_MARGIN} "
        f"of the best attack's AUC, or its 95% CI lies wholly above {CHANCE_BAND}")


@dataclass(frozen=True)
class BlindScores:
    auc: float
    auc_ci95: tuple[float, float] | None
    tpr_at_1pct_fpr: float
    tpr_at_1pct_fpr_ci95: tuple[float, float] | None
    n_members: int
    n_non_members: int
    folds: int


def blind_baseline(member_texts: Sequence[str], non_member_texts: Sequence[str], *, seed: int = 0, folds: int = 5,
                   bootstrap: int = 200) -> BlindScores:
    """Out-of-fold scores of a model-free text classifier (members = 1), and their AUC / TPR@1%FPR."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline, make_union

    texts = list(member_texts) + list(non_member_texts)
    y = np.r_[np.ones(len(member_texts), dtype=int), np.zeros(len(non_member_texts), dtype=int)]
    if min(len(member_texts), len(non_member_texts)) < folds:
        raise ValueError(f"need at least {folds} texts per side for {folds}-fold cross-validation")
    scores = np.zeros(len(texts))
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for train, test in cv.split(texts, y):
        # The vectoriser is fitted inside each fold: its vocabulary must not see the held-out texts.
        model = make_pipeline(
            make_union(TfidfVectorizer(analyzer="word", ngram_range=(1, 2), min_df=2, sublinear_tf=True),
                       TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True,
                                       max_features=50_000)),
            LogisticRegression(C=1.0, max_iter=2000, random_state=seed))
        model.fit([texts[i] for i in train], y[train])
        scores[test] = model.decision_function([texts[i] for i in test])
    m = mia_metrics(scores[y == 1], scores[y == 0], bootstrap=bootstrap, seed=seed)
    return BlindScores(auc=m.auc, auc_ci95=m.auc_ci95, tpr_at_1pct_fpr=m.tpr_at_1pct_fpr,
                       tpr_at_1pct_fpr_ci95=m.tpr_at_1pct_fpr_ci95, n_members=m.n_members,
                       n_non_members=m.n_non_members, folds=folds)


def rivals(blind_auc: float, blind_ci: tuple[float, float] | None, best_attack_auc: float | None) -> bool:
    """The rule in :data:`RULE`."""
    if blind_ci is not None and blind_ci[0] > CHANCE_BAND:
        return True
    if best_attack_auc is None:
        return False
    return blind_auc > CHANCE_BAND and blind_auc >= best_attack_auc - RIVAL_MARGIN


def beats_chance(blind_ci: tuple[float, float] | None) -> bool:
    """The blind classifier does better than a coin flip: its AUC's 95 % CI lies wholly above 0.5.

    Stricter than :func:`rivals`, for member / non-member sets the user drew
    (``privleak attack``): nothing guarantees they were split at random, and
    any significant model-free signal means a membership AUC mixes
    memorisation with the difference between the two sets."""
    return blind_ci is not None and blind_ci[0] > 0.5


def shifted(blind_auc: float, blind_ci: tuple[float, float] | None, best_aucs: dict[str, float],
            user_split: bool) -> tuple[bool, list[str]]:
    """Whether the member / non-member split is shifted, and the arms whose best attack the blind baseline rivals.

    One rule for every audit: shifted when the blind classifier rivals an arm's best attack or its own CI lies
    above :data:`CHANCE_BAND` (:func:`rivals`); for sets the user drew (``privleak attack``), also when it merely
    beats a coin flip (:func:`beats_chance`) — PrivLeak split ``run``'s data at random, nothing guarantees that of
    a user's two files."""
    rivalled = [n for n, auc in best_aucs.items() if rivals(blind_auc, None, auc)]
    out = bool(rivalled) or rivals(blind_auc, blind_ci, None) or (user_split and beats_chance(blind_ci))
    return out, rivalled
