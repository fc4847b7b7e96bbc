"""Text from people and from the model, made inert for the page's markdown: it shows as typed, but no image is
fetched, no link is live, no HTML or formatting takes effect (a question is shown in every open tab, and a model
reading a sign could be steered to write markdown).

Markdown's own rule is used: a character written as a numeric reference (`&#91;` for `[`) is literal text
and takes no part in the syntax. Escaped: the characters of images, links, HTML, emphasis, code, headings, tables
and LaTeX, `@` (e-mail autolinks), and the colon of `://` and the dot of `www.` (bare-URL autolinks).
"""

from __future__ import annotations

import re

_INERT = {c: f"&#{ord(c)};" for c in "\\`*_[]()!<>&#|~@$"}
_AUTOLINK = re.compile(r"(?i):(?=//)|(?<=www)\.")


def plain_text(text: str) -> str:
    """`text` for a markdown component, shown character for character as plain text."""
    inert = "".join(_INERT.get(c, c) for c in text)
    return _AUTOLINK.sub(lambda m: f"&#{ord(m.group(0))};", inert)
