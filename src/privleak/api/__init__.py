"""PrivLeak as a library: the two commands as typed Python calls (the command line is a layer over these).

* :func:`audit` — ``privleak run``: the whole audit of a config, every arm trained and attacked;
* :func:`attack` — ``privleak attack``: a model you trained (a directory, or the object in memory), attacked
  with every attack that needs no training.

Both return the typed results (:class:`privleak.results.AuditResults`, what ``results.json`` holds) and, with
``out=``, write the same run directory, ``results.json`` and ``report.html`` as the command line (a rerun with
the same ``out`` resumes where it stopped). Without ``out`` the run happens in a temporary directory that is
removed before the call returns: only the returned results remain.

Errors a user can fix are one exception type, :class:`PrivLeakError` (``privleak.core.errors.UserError``), whose
message is the one line the command line prints for the same input — options named as its flags
(``--members``), records of a list numbered as the lines of a file — raised before any work starts. Nothing is
printed unless asked: ``progress=True`` prints the command line's progress lines (and bars, on a terminal),
``progress=print`` or any callable gets each line as plain text. The process is left as found: torch's thread
count is put back after the call.

A model trained with PrivLeak's audit canaries and a DP claim (:mod:`privleak.integrations`: the Trainer
callback and the hook for your own loop) is attacked by :func:`attack` too, with ``audit_canaries=`` and
``claim=`` (a :class:`DPClaim`): the one-run audit then tests the claimed ε, and a refuted claim is the verdict
DP GUARANTEE VIOLATED.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from ..core.errors import UserError
from .claim import DPClaim
from .progress import Progress, notifier

if TYPE_CHECKING:
    from ..config import AuditConfig
    from ..data.audit_canaries import AuditCanary
    from ..results import AuditResults

__all__ = ["DPClaim", "PrivLeakError", "Progress", "attack", "audit"]

PrivLeakError = UserError

PathLike = Union[str, Path]


# --------------------------------------------------------------------------- privleak run

def audit(config: "AuditConfig | Mapping[str, Any] | PathLike | None" = None, out: PathLike | None = None, *,
          progress: Progress = None, report: bool = True) -> "AuditResults":
    """Run (or resume) the audit ``config`` describes: what ``privleak run`` does.

    ``config``: an :class:`~privleak.config.AuditConfig`, a dict with a config file's sections (docs/guide/
    config.md: ``{"profile": "smoke", "arms": ["baseline", "dp-8"]}``), the path of a YAML / TOML config file,
    or None (the defaults). ``out``: the run directory (created; reused to resume); None: a temporary one.
    ``report``: also write ``report.html`` there. Returns the judged results."""
    with _library_call():
        notifier(progress)  # a progress= that is neither silent, True nor a function: refused before any work
        cfg = _audit_config(config)
        from ..arms import resolve

        cfg = resolve(cfg)  # the arms checked and named canonically (the kinds need no torch)
        for option, value, what in (("--data", cfg.data.path, "a JSONL, CSV, text file or saved dataset directory"),
                                    ("--public", cfg.data.public, "a JSONL, CSV or text file of public text")):
            if value is not None and not Path(value).expanduser().exists():
                raise UserError(f"{option} {value}: file does not exist; pass {what}")
        with _run_directory(out) as (root, keep):
            from .checks import check_out_dir

            check_out_dir(root)
            from ..pipeline.checks import preflight
            from ..pipeline.rundir import RunDir

            preflight(cfg)  # the corpus, the model reference and the sizes, before torch loads
            with RunDir.locked(root):
                policy = cfg.compute_policy()  # a device that is not here: one line, before any work
                from ..executors import make_executor
                from ..pipeline import run_audit
                from .progress import reporting

                with reporting(progress) as notify:
                    results = run_audit(cfg, root, notify=notify,
                                        executor=make_executor(cfg.executor, notify=notify, device=policy.device))
                if report and keep:
                    from ..report.html import write_report

                    write_report(root)
            return results


def _audit_config(config: Any) -> "AuditConfig":
    from ..config import AuditConfig, build_config

    if isinstance(config, AuditConfig):
        return config
    return build_config(_config_data(config))


def _config_data(config: Any) -> dict[str, Any]:
    """A config file's sections from a path, a mapping or None."""
    from ..config import read_config_file

    if config is None:
        return {}
    if isinstance(config, (str, Path)):
        return read_config_file(config)
    if isinstance(config, Mapping):
        return _plain(config)
    raise UserError(f"config: a {type(config).__name__} is not a config; pass a dict of config sections, an "
                    "AuditConfig or the path of a YAML / TOML file")


def _plain(config: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): _plain(v) if isinstance(v, Mapping) else v for k, v in config.items()}


# --------------------------------------------------------------------------- privleak attack

def attack(target: Any, members: Any, non_members: Any, reference: Any = None, tokenizer: Any = None, *,
           base: Any = None, population: Any = None, canaries: PathLike | None = None,
           config: "Mapping[str, Any] | PathLike | None" = None, out: PathLike | None = None,
           seed: int | None = None, profile: str | None = None, max_length: int | None = None,
           text_format: str | None = None, text_field: str | None = None, group_field: str | None = None,
           device: str = "auto", progress: Progress = None, report: bool = True,
           audit_canaries: "list[AuditCanary] | None" = None, claim: DPClaim | None = None) -> "AuditResults":
    """Audit a model you trained with every attack that needs no training: what ``privleak attack`` does.

    ``target``: the model — a directory saved with ``save_pretrained``, a hub id in the local cache, a ``.gguf``
    file, a PEFT adapter directory (with ``base``), or the object itself: a ``transformers`` causal LM, a PEFT
    model on one, an Opacus ``GradSampleModule`` around one (``tokenizer`` then required). ``members`` /
    ``non_members`` / ``population``: a file (JSONL, CSV, text, PrivLeak JSONL) or a list of texts, of dicts with
    a ``text_field`` field, of privleak ``Record`` s, or a ``datasets.Dataset``. ``reference``: a model that never
    saw the members (the checkpoint you fine-tuned from), a path or an object (sharing ``tokenizer``): the
    control, and the reference attack and RMIA. ``canaries``: the ``canaries.json`` of exposure canaries planted
    in the members. ``config``: a config's ``attacks``, ``canaries`` and ``model.max_length`` sections (a dict or
    a file). The other options are the command's flags. ``audit_canaries`` / ``claim``: what
    :mod:`privleak.integrations` passes for a model trained with them (the one-run audit of the claimed ε).

    Returns the judged results; the model under audit is the arm ``target`` (kind ``external``)."""
    with _library_call():
        notifier(progress)
        from ..config import build_config
        from ..models.device import resolve_device, use_policy
        from .checks import named_field

        for flag, value in (("--text-field", text_field), ("--group-field", group_field)):
            named_field(flag, value)

        resolve_device(device)  # a device that is not here: one line, before anything is read
        file_data = _config_data(config)
        over: dict[str, Any] = {"one_run": {"canaries": 0}, "device": device}  # audit canaries: given, or none
        # The attack sizes are the quick profile's unless named: a GPU speeds the audit up, it does not resize it.
        over["profile"] = profile or file_data.get("profile") or "quick"
        for path, value in (("seed", seed), ("data.text_field", text_field), ("data.group_field", group_field),
                            ("model.max_length", max_length)):
            _put(over, path, value)
        if text_format is not None:
            from ..models.batching import check_format

            over.setdefault("model", {})["text_format"] = check_format(text_format)
        if audit_canaries:
            over["one_run"] = _one_run_design(audit_canaries)
        cfg = build_config(file_data, over)
        policy = cfg.compute_policy()
        from .inputs import Staging, is_path

        # Every check that needs no work, cheapest first, before anything is created (objects are written to a
        # temporary directory to be checked: .inputs).
        with Staging() as staged:
            tgt = _model_ref(staged, target, tokenizer, base, "target")
            ref = _model_ref(staged, reference, tokenizer, None, "reference") if reference is not None else None
            tf = cfg.data.text_field
            files = {option: (str(value) if is_path(value) else staged.records(value, name, option, tf))
                     if value is not None else None
                     for option, name, value in (("--members", "members", members),
                                                 ("--non-members", "non_members", non_members),
                                                 ("--population", "population", population))}
            from ..pipeline.attack_inputs import check_inputs

            inputs = check_inputs(cfg, tgt, ref, files["--members"], files["--non-members"], files["--population"],
                                  None if canaries is None else str(canaries))
            inputs = _with_canaries(inputs, audit_canaries, claim)
            with _run_directory(out) as (root, keep):
                from .checks import check_out_dir

                check_out_dir(root)
                from ..executors import make_executor
                from ..pipeline.attack import run_attack
                from ..pipeline.rundir import RunDir
                from .progress import reporting

                # One process per run directory, from here until the report is written.
                with RunDir.locked(root), use_policy(policy):  # every model call on the device, bf16 autocast on CUDA
                    inputs = _placed(inputs, staged, RunDir.open(root).root)
                    with reporting(progress) as notify:
                        results = run_attack(cfg, inputs, root, notify=notify,
                                             executor=make_executor(cfg.executor, notify=notify, device=policy.device))
                    if report and keep:
                        from ..report.html import write_report

                        write_report(root)
                return results


def _put(over: dict[str, Any], path: str, value: Any) -> None:
    if value is None:
        return
    *sections, key = path.split(".")
    node = over
    for sec in sections:
        node = node.setdefault(sec, {})
    node[key] = value


def _one_run_design(canaries: "list[AuditCanary]") -> dict[str, Any]:
    """The ``one_run`` section the audit canaries were made with (their words: prefix, then secret)."""
    prefix = {len(c.prefix.split()) for c in canaries}
    secret = {len(c.secret.split()) for c in canaries}
    if len(prefix) != 1 or len(secret) != 1:
        raise UserError("audit_canaries: the canaries differ in length; give the canaries one design made "
                        "(privleak.integrations.AuditHook)")
    return {"canaries": len(canaries), "prefix_words": prefix.pop(), "secret_words": secret.pop()}


def _model_ref(staged: Any, model: Any, tokenizer: Any, base: Any, role: str) -> Any:
    """A checked :class:`~privleak.models.external.ModelRef` for a path (as the command line checks it) or an
    object (written to ``staged`` first)."""
    from dataclasses import replace

    from ..models.external import check_full_model, check_target
    from .inputs import is_path

    option = f"--{role}"
    if is_path(model):
        if base is not None and not is_path(base):
            raise UserError("--base: give the directory of the adapter's base model (an in-memory PEFT model carries "
                            "its own base: pass it alone)")
        if role == "target":
            return check_target(str(model), None if base is None else str(base))
        return check_full_model(str(model), option)
    if base is not None:
        raise UserError("--base: an in-memory model needs no base (a PEFT model carries its own); drop base=")
    path, base_path, name = staged.model(model, tokenizer, role, option)
    if base_path is not None:
        ref = check_target(path, base_path)
        return replace(ref, ref=name, base=replace(ref.base, ref=f"{name} (its base)"))
    return replace(check_full_model(path, option), ref=name)


def _with_canaries(inputs: Any, audit_canaries: Any, claim: DPClaim | None) -> Any:
    from dataclasses import replace

    if claim is not None and not isinstance(claim, DPClaim):
        raise UserError(f"claim: a {type(claim).__name__} is not a DPClaim; give DPClaim(epsilon=..., delta=..., ...) "
                        "or DPClaim.from_engine(privacy_engine, delta)")
    if claim is not None and not audit_canaries:
        raise UserError("claim: a DP claim is tested by the audit canaries its training inserted; give "
                        "audit_canaries= too (privleak.integrations inserts them)")
    if not audit_canaries:
        return inputs
    return replace(inputs, audit_canaries=list(audit_canaries), claim=claim.privacy() if claim is not None else None)


def _placed(inputs: Any, staged: Any, root: Path) -> Any:
    """``inputs`` with every staged path replaced by its place in the run directory (:meth:`Staging.commit`)."""
    from dataclasses import replace

    moved = staged.commit(root)
    if not moved:
        return inputs

    def ref(r: Any) -> Any:
        if r is None:
            return None
        return replace(r, path=moved.get(r.path, r.path), base=ref(r.base))

    files = {k: moved.get(v, v) for k, v in inputs.files.items()}
    return replace(inputs, target=ref(inputs.target), reference=ref(inputs.reference), files=files)


# --------------------------------------------------------------------------- what every call shares

@contextmanager
def _run_directory(out: PathLike | None) -> Iterator[tuple[Path, bool]]:
    """(the run directory, whether it is kept): ``out``, or a temporary directory removed on the way out."""
    if out is not None:
        yield Path(out).expanduser(), True
        return
    tmp = Path(tempfile.mkdtemp(prefix="privleak-run-"))
    try:
        yield tmp / "run", False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _library_call() -> Iterator[None]:
    """What the command line's ``main`` does around a command, for a library call: a typed setting built from the
    caller's input that fails validation is the same one-line :class:`PrivLeakError`; torch's thread count (which
    the executors set for the run) is put back."""
    import sys

    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    try:
        yield
    except UserError:
        raise
    except Exception as exc:
        from pydantic import ValidationError

        if isinstance(exc, ValidationError):
            e = exc.errors()[0]
            loc = ".".join(str(x) for x in e.get("loc", ())) or exc.title
            raise UserError(f"invalid value for {loc}: {e.get('msg', 'invalid')}; check the option or config "
                            "field") from None
        raise
    finally:
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(threads if threads is not None else torch.get_num_threads())
