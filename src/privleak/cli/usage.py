"""typer / click usage errors as one line: the option, what is wrong, the fix."""

from __future__ import annotations

from typing import Any


def click_exceptions() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(usage-error classes, abort classes) of the click the installed typer
    uses: typer >= 0.25 bundles its own copy (``typer._click``), whose
    exceptions are not the standalone ``click`` package's."""
    usage: list[type] = []
    abort: list[type] = []
    try:
        from typer._click import exceptions as bundled  # typer >= 0.25 (Abort lives in typer.exceptions)

        usage.append(bundled.ClickException)
    except ImportError:  # pragma: no cover - older typer runs on the click package
        pass
    try:
        import click

        usage.append(click.exceptions.ClickException)
        abort.append(click.exceptions.Abort)
    except ImportError:  # pragma: no cover
        pass
    try:
        from typer import exceptions as typer_exceptions  # typer >= 0.25

        abort.append(typer_exceptions.Abort)
    except ImportError:  # pragma: no cover - click-based typer (e.g. the one Flower pins, < 0.21)
        pass
    return tuple(usage), tuple(abort)


def _param_fix(param: Any) -> str:
    """What to give instead, from the parameter's type and range."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)  # typer >= 0.25
    if annotation is None:  # pragma: no cover - click-based typer
        name = getattr(getattr(param, "type", None), "name", "")
        annotation = {"integer": int, "integer range": int, "float": float, "float range": float}.get(name)
    lo = getattr(param, "min", None)
    hi = getattr(param, "max", None)
    if lo is None and hi is None:
        lo, hi = getattr(getattr(param, "type", None), "min", None), getattr(getattr(param, "type", None), "max", None)
    bounds = (f" from {lo} to {hi}" if lo is not None and hi is not None else f" of at least {lo}" if lo is not None
              else f" of at most {hi}" if hi is not None else "")
    if annotation is int:
        return f"give a whole number{bounds}"
    if annotation is float:
        return f"give a number{bounds}"
    return "give a valid value"


def _param_name(param: Any) -> str | None:
    if param is None:
        return None
    opts = [o for o in getattr(param, "opts", []) if o.startswith("-")]
    if opts:
        return max(opts, key=len)
    return getattr(param, "metavar", None) or str(getattr(param, "name", "")).upper() or None


def usage_message(exc: BaseException) -> str:
    """One line for a typer/click usage error: the option, what is wrong, the fix."""
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command_path", None) or "privleak"
    see = f"see '{command} --help'"
    name = type(exc).__name__
    if name == "NoArgsIsHelpError":
        return f"{command}: no command given; choose one of the commands listed above ({see})"
    param = getattr(exc, "param", None)
    hint = getattr(exc, "param_hint", None)
    if isinstance(hint, (list, tuple)):
        hint = " / ".join(str(h) for h in hint)
    hint = str(hint).strip("'\"") if hint else _param_name(param)
    message = " ".join(str(getattr(exc, "message", "") or exc).split()).rstrip(".")
    if name == "NoSuchOption":
        option = getattr(exc, "option_name", "")
        maybe = sorted(getattr(exc, "possibilities", None) or [])
        suggestion = f" (did you mean {' or '.join(maybe)}?)" if maybe else ""
        return f"{command}: no such option {option}{suggestion}; {see} for the options"
    if name == "MissingParameter":
        kind = getattr(exc, "param_type", None) or getattr(param, "param_type_name", "option")
        example = f"{hint} VALUE" if kind == "option" else hint
        return f"{command}: missing {kind} {hint}; give it, e.g. {command} {example} ({see})"
    if name == "BadParameter" and hint:
        return f"{command} {hint}: {message}; {_param_fix(param)} ({see})"
    if name == "BadOptionUsage" and "requires an argument" in message:
        return f"{command}: {message}; give a value after it ({see})"
    if hint:
        return f"{command} {hint}: {message}; {see}"
    return f"{command}: {message}; {see}"
