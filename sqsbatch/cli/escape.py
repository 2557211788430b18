"""Text from a queue, made safe to print on a terminal: control characters become escapes.

A message body, an attribute, an error message or a log message can hold anything: a newline
that splits a table row or a log line, a terminal escape sequence (`ESC [ 2 J` clears the
screen, `ESC ] 52` writes the clipboard), a bidirectional override that shows text in another
order than it is. `printable` shows each such character as a Python-style escape (`\\n`,
`\\x1b`, `\\u202e`), so what is printed is one line that means what it says. JSON output needs
none of this: `json.dumps` escapes control characters itself.
"""

from __future__ import annotations

import re

__all__ = ["preview", "printable"]

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # C0 and C1 controls, DEL: ESC starts every terminal sequence
    "\u00ad\u061c\u180e"  # soft hyphen, Arabic letter mark, Mongolian vowel separator
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f"  # zero-width, line/paragraph separators, bidi
    "\ufeff\ufff9-\ufffb"  # byte order mark, interlinear annotations
    "\ud800-\udfff]"  # lone surrogates (undecodable bytes): a terminal cannot encode them
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control, format and separator character escaped; one line."""
    return _UNSAFE.sub(_escaped, text)


def preview(text: str, chars: int) -> str:
    """`printable(text)` cut to at most `chars` characters, with `…` when it was cut."""
    shown = printable(text[: chars + 1])
    if len(shown) <= chars and len(text) <= chars:
        return shown
    return shown[: chars - 1] + "…"
