"""Classify one shell command line into what it does to files: inspect, edit, test or run.

Agents drive the repository mostly through a shell (mini-swe-agent's ``bash``, Codex's
``exec_command``, Claude Code's ``Bash``), so the behaviour analytics read shell commands.
The reading is a heuristic over the usual coding-agent idioms, documented per rule below.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field

INSPECT, EDIT, TEST, RUN, OTHER = "inspect", "edit", "test", "run", "other"

TEST_COMMAND = re.compile(
    r"(^|[\s/])(pytest|py\.test|tox|nox|ctest)(\s|$)"
    r"|python[0-9.]*\s+-m\s+(pytest|unittest)"
    r"|python[0-9.]*\s+(\S*/)?(test_\w+|\w+_tests?|tests?)\.py(\s|$)"
    r"|\bmake\s+(test|check)\b|\b(npm|yarn|pnpm)\s+(run\s+)?test\b"
    r"|\b(go|cargo|mvn|gradle)\s+test\b"
    r"|(^|[\s/])(tests?/\S*\.sh|test\.sh|run_tests\S*)(\s|$)"
)
"""A command that runs a test suite: test runners, ``make test``, a tests/*.sh script, a
Python test script (``python3 run_tests.py``, ``python test_parser.py``)."""

READERS = frozenset({"cat", "head", "tail", "less", "more", "nl", "bat", "view", "wc", "od", "xxd"})
"""Commands whose file arguments are read."""
SEARCHERS = frozenset({"grep", "egrep", "rg", "ag", "ack"})
"""Commands whose first operand is a pattern and the rest are files read."""
RUNNERS = re.compile(r"^(python[0-9.]*|node|bash|sh|ruby|perl|php)$")


@dataclass
class Action:
    """What one command (or tool call) does: its kind and the files it touches."""

    kind: str
    files: list[str] = field(default_factory=list)
    text: str = ""


def classify_shell(command: str) -> list[Action]:
    """The actions of a command line, one per simple command (``a && b; c | d``)."""
    actions: list[Action] = []
    for words, redirects in _simple_commands(strip_heredocs(command)):
        script = _shell_script(words)
        if script is not None:
            actions.extend(classify_shell(script))
        else:
            actions.append(_classify_words(words, command))
        if redirects:
            actions.append(Action(EDIT, [normalise(f) for f in redirects], command))
    kept = [a for a in actions if a.kind != OTHER and (a.kind != INSPECT or a.files)]
    return kept or [Action(OTHER, [], command)]


def _simple_commands(line: str) -> list[tuple[list[str], list[str]]]:
    """Split on ``&& || ; | newline``: (words, files written by ``>``/``>>``) per command."""
    lexer = shlex.shlex(line.replace("\n", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: fall back to whitespace
        tokens = line.split()
    commands: list[tuple[list[str], list[str]]] = [([], [])]
    pending_redirect = False
    for token in tokens:
        words, redirects = commands[-1]
        if pending_redirect:
            pending_redirect = False
            if not token.startswith(("/dev/", "&")):
                redirects.append(token)
        elif token in {">", ">>", ">|"}:
            pending_redirect = True
            if words and words[-1].isdigit():
                words.pop()  # the fd of 2> belongs to the redirect
        elif token and set(token) <= set("&|;()<>"):
            commands.append(([], []))
        else:
            words.append(token)
    return [c for c in commands if c[0] or c[1]]


HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")


def strip_heredocs(command: str) -> str:
    """The command without here-document bodies (``cat <<'EOF' > f.py ... EOF`` keeps ``cat > f.py``)."""
    out: list[str] = []
    lines = iter(command.split("\n"))
    for line in lines:
        match = HEREDOC.search(line)
        out.append(HEREDOC.sub(" ", line))
        if match:
            for body_line in lines:
                if body_line.strip() == match.group(2):
                    break
    return "\n".join(out)


def _shell_script(words: list[str]) -> str | None:
    """The script of ``bash -lc 'script'`` (how Codex wraps its commands), else None."""
    wrapped = len(words) >= 3 and posixpath.basename(words[0]) in {"bash", "sh", "zsh"}
    return words[2] if wrapped and words[1].startswith("-") and "c" in words[1] else None


def _classify_words(words: list[str], whole: str) -> Action:
    if TEST_COMMAND.search(" ".join(words)):
        return Action(TEST, [], whole)
    while words and (
        "=" in words[0] and not words[0].startswith("-") or words[0] in {"sudo", "env"}
    ):
        words = words[1:]  # leading VAR=value assignments and wrappers
    if not words:
        return Action(OTHER)
    name, args = posixpath.basename(words[0]), words[1:]
    operands = [a for a in args if not a.startswith("-")]
    if name == "sed":
        in_place = any(a == "-i" or a.startswith(("-i", "--in-place")) for a in args)
        files = [normalise(f) for f in operands[0 if "-e" in args else 1 :]]
        return Action(EDIT if in_place else INSPECT, files, whole)
    if name == "perl" and any(a.startswith("-") and "i" in a and "p" in a for a in args):
        return Action(EDIT, [normalise(f) for f in operands[1:]], whole)
    if name in {"tee", "touch", "truncate"} or name in {"patch"} or words[:2] == ["git", "apply"]:
        return Action(EDIT, [normalise(f) for f in operands if name != "git"], whole)
    if name in {"cp", "mv"} and len(operands) >= 2:
        return Action(EDIT, [normalise(operands[-1])], whole)
    if name in READERS:
        return Action(INSPECT, [normalise(f) for f in operands], whole)
    if name in SEARCHERS:
        return Action(INSPECT, [normalise(f) for f in operands[1:] if _looks_like_file(f)], whole)
    if name == "awk":
        return Action(INSPECT, [normalise(f) for f in operands[1:]], whole)
    if RUNNERS.match(name) or name.startswith("./"):
        target = words[0] if name.startswith("./") else next(iter(operands), "")
        return Action(
            RUN, [normalise(target)] if target and _looks_like_file(target) else [], whole
        )
    return Action(OTHER, [], whole)


def _looks_like_file(word: str) -> bool:
    return "/" in word or bool(re.search(r"\.\w+$", word))


def normalise(path: str) -> str:
    """One spelling per file: no ``./`` prefix, no redundant separators."""
    path = posixpath.normpath(path.strip("'\""))
    return path.removeprefix("./")


def mentions(text: str, files: list[str]) -> bool:
    """Whether a command refers to any of ``files`` (by path, base name or module name)."""
    for f in files:
        base = posixpath.basename(f)
        stem = base.rsplit(".", 1)[0]
        if (
            f in text
            or base in text
            or (len(stem) > 2 and re.search(rf"\b{re.escape(stem)}\b", text))
        ):
            return True
    return False
