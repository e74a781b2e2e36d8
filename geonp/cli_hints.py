"""Fix hints of geonp errors in the CLI's own syntax: ``reference='none'`` -> ``--reference none`` (:mod:`geonp.cli`).

The library's messages name Python keywords (``pass calibrate=False``), which a command-line user cannot type.
:func:`cli_hints` rewrites the bare ``name=value`` tokens whose name is an option of the subcommand, read from
its argparse parser, and leaves everything else (``ds.resample(time='1h')``, ``xr.decode_cf``) as it is.
"""

from __future__ import annotations

import argparse
import re
import shlex

__all__ = ["cli_hints", "command_options"]

# a bare ``name=value``: not part of a longer name or path (``ds.x=``, ``--a=``, ``?a=``), not ``==``; the value a
# quoted string, a list, ``...``, a plain word/number (``EPSG:4326``, ``1.5``, ``2020-01-01T00:00``) or nothing
_HINT = re.compile(r"""(?<![\w.\-'"=/?&])(?P<name>[a-z_][a-z0-9_]*)=(?!=)"""
                   r"""(?P<value>'[^']*'|"[^"]*"|\[[^\[\]]*\]|\.\.\.|-?[\w:+]+(?:[.\-][\w:+]+)*"""
                   r"""|(?=[\s,.;)]|$))(?![\w(\[:+\-]|\.\w)""")
_CALL_BEFORE = re.compile(r"[\w.\])]")  # a "(" right after these opens a call's arguments


def command_options(command: str) -> dict[str, argparse.Action]:
    """The options of a subcommand of ``geonp``, by their Python name (the argparse ``dest``).

    Parameters
    ----------
    command : str
        ``"infill"``, ``"forecast"``, ``"fit"`` or ``"demo"``.

    Returns
    -------
    dict of str to argparse.Action
        ``{"reference": <--reference>, "init_time": <--init-time>, ...}``: optional arguments only (no positional
        ``INPUT``, no ``--help``); empty for an unknown command.
    """
    from .cli_args import _parser

    commands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = commands.choices.get(command)
    if parser is None:
        return {}
    return {a.dest: a for a in parser._actions
            if a.option_strings and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))}


def _in_call(message: str) -> list[bool]:
    """Per character of ``message``: whether it lies inside the parentheses of a call (``f(...)``, ``x.f(...)``)."""
    inside, stack = [], []
    for i, char in enumerate(message):
        if char == "(":
            stack.append((bool(stack) and stack[-1]) or (i > 0 and bool(_CALL_BEFORE.match(message[i - 1]))))
        elif char == ")" and stack:
            stack.pop()
        inside.append(bool(stack) and stack[-1])
    return inside


def _unquote(text: str) -> tuple[str, bool]:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1], True
    return text, False


def _word(text: str) -> str:
    """A value as typed on a command line: quoted strings shell-quoted (``'a b'``), the rest (``6``, ``...``) as is."""
    value, quoted = _unquote(text)
    return shlex.quote(value) if quoted else value


def _flag(action: argparse.Action, value: str) -> str | None:
    """``--name value`` (``--flag`` / ``--no-flag`` for switches) for ``name=value``; None where the CLI has none."""
    long = [s for s in action.option_strings if s.startswith("--")] or action.option_strings
    if action.nargs == 0:  # a switch: store_true/false, --x/--no-x
        if value == "":
            return long[0]
        if value not in ("True", "False"):
            return None
        wanted = value == "True"
        if isinstance(action, argparse.BooleanOptionalAction):
            return long[0] if wanted else next((s for s in long if s.startswith("--no-")), None)
        return long[0] if wanted == bool(action.const) else None
    if value == "":
        return long[0]
    if value.startswith("["):
        if action.nargs not in ("*", "+") and not isinstance(action.nargs, int):
            return None
        items = [_word(item) for item in value[1:-1].split(",") if item.strip()]
        return " ".join([long[0], *items])
    if value in ("None", "True", "False"):
        return None
    if action.choices is not None and _unquote(value)[0] not in action.choices:
        return None
    return f"{long[0]} {_word(value)}"


def cli_hints(message: str, command: str, options: dict[str, argparse.Action] | None = None) -> str:
    """Rewrite the Python keyword hints of an error message into the options of a ``geonp`` subcommand.

    A bare ``name=value`` whose ``name`` is an option of ``command`` becomes the option as typed on the command
    line: ``reference='none'`` -> ``--reference none``, ``hours=6`` -> ``--hours 6``, ``init_time=...`` ->
    ``--init-time ...``, ``calibrate=False`` -> ``--no-calibrate``, ``overwrite=True`` -> ``--overwrite``,
    ``covariates=['elevation']`` -> ``--covariates elevation``, ``context_frames=`` -> ``--context-frames``.
    A CLI note the message already gives beside the hint (``overwrite=True (CLI: --overwrite)``, ``task='forecast'
    (CLI: geonp fit --task forecast)``) is not repeated.

    Left as they are: names the subcommand has no option for, values it cannot take (``calibrate='auto'``, a
    choice it does not offer), tokens inside a call's parentheses (``ds.resample(time='1h')``,
    ``ds.np.fit(task='forecast')``) and anything that is not a ``name=value`` token.

    Parameters
    ----------
    message : str
        The error message (one line).
    command : str
        The subcommand that failed: ``"infill"``, ``"forecast"``, ``"fit"`` or ``"demo"``.
    options : dict of str to argparse.Action, optional
        The options by Python name; default: :func:`command_options` of ``command``.

    Returns
    -------
    str
        ``message`` with its hints in CLI syntax.
    """
    options = command_options(command) if options is None else options
    inside = _in_call(message)
    out, end, flags = [], 0, set()
    for m in _HINT.finditer(message):
        action = options.get(m["name"])
        if action is None or m.start() < end or inside[m.start()]:
            continue
        flag = _flag(action, m["value"])
        if flag is None:
            continue
        stop = m.end()
        note = re.compile(r"\s*\(CLI:?\s+(?:geonp\s+\w+\s+)?(" + re.escape(flag.split()[0])
                          + r"(?![\w-])[^()]*)\)").match(message, stop)
        if note is not None:  # "targets= (CLI --targets PATH)" -> "--targets PATH"; "overwrite=True (CLI: --overwrite)"
            flag, stop = (note[1].strip() if m["value"] == "" else flag), note.end()
        out += [message[end:m.start()], flag]
        flags.add(flag.split()[0])
        end = stop
    text = "".join([*out, message[end:]])
    for flag in flags:  # "(e.g. --crs EPSG:27700, CLI --crs)" -> "(e.g. --crs EPSG:27700)"
        text = re.sub(r"[,;]\s*CLI:?\s+" + re.escape(flag) + r"(?=\))", "", text)
    return text
