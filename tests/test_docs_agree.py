"""The help, the guide and the README agree with the code (issue 39, item 3).

Everything a user can type is listed from the code itself — every sub-command and option from the typer app
(its click command tree), every profile from ``policy.PROFILES``, every arm kind from the arm registry — and each
is looked for in the rendered ``--help`` and in ``docs/``: a new option, profile or kind fails here until it is
described in both. The help texts are also checked as rich renders them (typer prints help through rich markup,
which ate ``[ray]`` from ``pip install 'privleak[ray]'``), and positional arguments must show their help (typer
≤ 0.20 on click ≥ 8.2 dropped it; :func:`privleak.cli.command` puts it back).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COMMANDS_MD = DOCS / "guide" / "commands.md"


def _tree():
    """(path words, click command) of every sub-command, groups included, depth first."""
    from privleak.cli import command

    out = []
    stack = [((), command())]
    while stack:
        path, cmd = stack.pop()
        if path:
            out.append((path, cmd))
        for name, sub in sorted(getattr(cmd, "commands", {}).items(), reverse=True):
            stack.append(((*path, name), sub))
    return out


def _leaves():
    return [(p, c) for p, c in _tree() if not getattr(c, "commands", None)]


#: Each command's rendered help, once per process: a hundred option tests read a dozen commands' help.
_HELP: dict[tuple[str, ...], str] = {}


def _help(argv: list[str], capsys, monkeypatch) -> str:
    from privleak.cli import main

    if tuple(argv) not in _HELP:
        monkeypatch.setenv("COLUMNS", "400")  # one line per option: a flag is never split by the wrapping
        try:
            main([*argv, "--help"])
        except SystemExit as exc:
            assert exc.code in (0, None), exc.code
        _HELP[tuple(argv)] = capsys.readouterr().out
    return _HELP[tuple(argv)]


def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md")))


def _section(path: tuple[str, ...]) -> str:
    """The part of the commands page about ``privleak <path>``: from its heading (or its group's) to the next."""
    text = COMMANDS_MD.read_text(encoding="utf-8")
    heads = [(m.start(), m.group(1)) for m in re.finditer(r"^## `privleak ([^`]+)`", text, flags=re.M)]
    for words in (" ".join(path[:n]) for n in range(len(path), 0, -1)):
        for i, (start, name) in enumerate(heads):
            if name == words:
                end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
                return text[start:end]
    return ""


def _options(cmd) -> list:
    return [p for p in cmd.params if p.param_type_name == "option" and "--help" not in p.opts
            and not getattr(p, "hidden", False)]


def test_the_lists_come_from_the_code():
    """The lists below are the code's, not a copy: a command, option, profile or kind added there is checked."""
    from privleak.arms import KINDS
    from privleak.policy import PROFILES

    paths = {" ".join(p) for p, _ in _leaves()}
    assert {"run", "attack", "report", "budget", "guard build", "data generate"} <= paths
    assert {"quick", "smoke", "smollm2"} <= set(PROFILES)
    assert {"dp", "dp-user", "retrain", "unlearn-ga"} <= set(KINDS)


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in _tree()])
def test_every_sub_command_is_in_the_help_and_the_docs(path, capsys, monkeypatch):
    *group, name = path.split(" ")
    listing = _help(group, capsys, monkeypatch)
    assert re.search(rf"│ {re.escape(name)}\s", listing), f"`privleak {' '.join(group)} --help` does not list {name}"
    docs = _docs_text()
    assert f"privleak {path}" in docs, f"`privleak {path}` appears nowhere in docs/"
    if not group:  # the commands page's table and the README's tour name every command
        table = COMMANDS_MD.read_text(encoding="utf-8").split("\n## ")[0]
        assert f"`{name}" in table, f"the table of {COMMANDS_MD.name} does not list {name}"
        assert f"privleak {name}" in (ROOT / "README.md").read_text(encoding="utf-8"), f"README never shows {name}"


@pytest.mark.parametrize("path,flag", [(" ".join(p), max(o.opts, key=len)) for p, c in _leaves() for o in _options(c)])
def test_every_option_is_in_the_help_and_in_its_command_s_docs(path, flag, capsys, monkeypatch):
    from privleak.cli import command

    cmd = command()
    for word in path.split(" "):
        cmd = cmd.commands[word]
    param = next(p for p in _options(cmd) if flag in p.opts)
    assert param.help, f"privleak {path} {flag} has no help text"
    shown = _help(path.split(" "), capsys, monkeypatch)
    assert re.search(rf"{re.escape(flag)}(?![\w-])", shown), f"{flag} missing from `privleak {path} --help`"
    section = _section(tuple(path.split(" ")))
    assert section, f"no section for `privleak {path}` in {COMMANDS_MD.name}"
    names = [o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")]
    assert any(re.search(rf"`[^`]*{re.escape(o)}(?![\w-])", section) for o in names), (
        f"`privleak {path}` {flag} is not in its section of {COMMANDS_MD.name}")


@pytest.mark.parametrize("path", [" ".join(p) for p, c in _leaves()
                                  if any(q.param_type_name == "argument" for q in c.params)])
def test_every_positional_argument_shows_its_help(path, capsys, monkeypatch):
    from privleak.cli import command

    cmd = command()
    for word in path.split(" "):
        cmd = cmd.commands[word]
    shown = " ".join(_help(path.split(" "), capsys, monkeypatch).split())
    for arg in (q for q in cmd.params if q.param_type_name == "argument"):
        assert arg.help, f"privleak {path} {arg.name}: no help text"
        first_words = " ".join(arg.help.split()[:4])
        assert first_words in shown, f"`privleak {path} --help` does not show {arg.name}'s help ({first_words!r})"


def test_help_texts_survive_rich_markup():
    """typer renders help as rich markup: "[ray]" in a help text is a tag and vanishes unless written "\\[ray]"."""
    from rich.text import Text

    for path, cmd in _tree():
        texts = [("(command)", cmd.help or "")] + [(p.name, p.help or "") for p in cmd.params]
        for name, text in texts:
            rendered = Text.from_markup(text).plain
            assert rendered == text.replace("\\[", "["), f"privleak {' '.join(path)} {name}: {text!r} shows as {rendered!r}"


def test_the_executor_help_names_the_ray_extra(capsys, monkeypatch):
    assert "pip install 'privleak[ray]'" in _help(["run"], capsys, monkeypatch)


def test_every_profile_is_in_the_run_help_and_the_docs(capsys, monkeypatch):
    from privleak.policy import PROFILES

    shown = _help(["run"], capsys, monkeypatch)
    config = (DOCS / "guide" / "config.md").read_text(encoding="utf-8")
    commands = _section(("run",))
    for name in PROFILES:
        assert re.search(rf"(?<![\w-]){name}(?![\w-])", shown), f"profile {name} missing from `privleak run --help`"
        assert f"| `{name}` |" in config, f"profile {name} missing from the profiles table of config.md"
        assert name in commands, f"profile {name} missing from the run section of commands.md"


def _kind_names(kind) -> list[str]:
    """How a kind's arms are written: its example (dp-8) and its generic form (dp-ε), or its name."""
    if kind.param is None:
        return [kind.name]
    return [kind.example or f"{kind.name}-8", f"{kind.name}-{kind.param}"]


def _arm_kinds():
    from privleak.arms import KINDS

    return [k for k in KINDS.values() if k.model != "provided"]  # external: the model `privleak attack` audits


@pytest.mark.parametrize("kind", [k.name for k in _arm_kinds()])
def test_every_arm_kind_is_in_the_arms_help_and_the_docs(kind, capsys, monkeypatch):
    from privleak.arms import KINDS

    k = KINDS[kind]
    shown = " ".join(_help(["run"], capsys, monkeypatch).split())
    arms_help = shown[shown.index("--arms"):shown.index("--delta")]
    docs = _docs_text()

    def found(text: str) -> bool:
        return any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-]|\.\d)", text) for n in _kind_names(k))

    assert found(arms_help), f"arm kind {kind} ({' / '.join(_kind_names(k))}) is not among --arms' examples"
    assert found(docs), f"arm kind {kind} ({' / '.join(_kind_names(k))}) appears nowhere in docs/"


def test_every_guide_page_is_linked_from_the_guide_index_and_the_nav():
    index = (DOCS / "guide" / "index.md").read_text(encoding="utf-8")
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in sorted((DOCS / "guide").glob("*.md")):
        if page.name == "index.md":
            continue
        assert f"({page.name})" in index, f"guide/index.md does not link {page.name}"
        assert f"guide/{page.name}" in nav, f"mkdocs.yml's nav does not list guide/{page.name}"
