"""Membership inference, all in one place.

* :mod:`.scores` — the score functions from the shared scoring pass (LOSS, zlib, min-k%, min-k%++, reference);
* :mod:`.lira`, :mod:`.rmia` — LiRA (Carlini et al. 2022) and RMIA (Zarifzadeh et al. 2024);
* :mod:`.shadows` — both with the audit's shadow models;
* :mod:`.attacks` — the registered attacks and their one result type (AUC, TPR at low FPR, ROC);
* :mod:`.client` — the client-level attack (a whole clinic's records);
* :mod:`.selection` — which records are compared: exchangeable sets, one record per unit.

The ROC metrics themselves are in :mod:`privleak.core.metrics`; the bounds the audit draws from the scores
(empirical ε, the one-run bound) in :mod:`privleak.audit.summaries`.
"""
