"""The ``transformers`` Trainer callback: PrivLeak's one-run audit of a DP fine-tune, run when training ends.

Usage (docs/guide/library.md)::

    audit = PrivLeakCallback(tokenizer, non_members=heldout, delta=1e-5, privacy_engine=engine)
    train = audit.insert(train_texts)            # the audit canaries, each with probability ½, before tokenising
    trainer = Trainer(model, args, train_dataset=tokenize(train), callbacks=[audit])
    trainer.train()                              # ends with the audit: raises DPGuaranteeViolated if refuted
    audit.results                                # the typed results; <output_dir>/privleak/ holds results.json

At ``on_train_begin`` the Trainer's DP optimizer gets PrivLeak's white-box gradient canaries
(:meth:`~privleak.integrations.hook.AuditHook.watch`). At ``on_train_end`` (the main process only) the trained
model — through Opacus's ``GradSampleModule`` — is attacked as ``privleak attack`` attacks a directory
(:meth:`~privleak.integrations.hook.AuditHook.finish`), the claim read from the ``PrivacyEngine`` and the
clipping bound from the Trainer's DP optimizer; the headline figures join the Trainer's log (``trainer.state.log_history``, keys ``privleak/…``) and the ``privleak`` logger.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from .hook import AuditHook, _dp_optimizer, headline

__all__ = ["PrivLeakCallback"]


class PrivLeakCallback(AuditHook, TrainerCallback):
    """:class:`~privleak.integrations.hook.AuditHook` as a Trainer callback (the same arguments; ``out`` defaults
    to ``<args.output_dir>/privleak``)."""

    def on_train_begin(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> Any:
        """The white-box gradient canaries join the Trainer's DP optimizer (:meth:`AuditHook.watch`) before its
        first step (none with ``gradient_canaries=0``)."""
        if _dp_optimizer(optimizer) is not None:  # a plain optimizer: no DP step to watch (nothing claimed)
            self.watch(optimizer)
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                     **kwargs: Any) -> Any:
        if not state.is_world_process_zero:  # one audit per training, by the process that saves the model
            return control
        out = self.out if self.out is not None else Path(args.output_dir) / "privleak"
        try:
            self.finish(model, optimizer=optimizer, out=out)
        finally:
            if self.results is not None:
                state.log_history.append({**headline(self.results), "step": state.global_step})
        return control
