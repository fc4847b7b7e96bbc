"""What the page says when a source cannot be opened, without telling a visitor about the server's files: a typed
path that does not exist, a folder, an empty file, a file that is not a video and one that cannot be read all
get the same message, and no absolute path is shown that the person did not type (the working directory, an
upload's temporary folder). Streams and cameras keep the capture's own message: it names only what was typed."""

from __future__ import annotations

from pathlib import Path


def page_source_error(kind: str, typed: str | None, upload: str | None, message: str) -> str:
    """The message for a source of `kind` (the page's SOURCE_KINDS) that failed with `message`."""
    if kind == "path or URL" and typed and "://" not in typed:
        return (
            f"'{typed.strip()}' cannot be watched: there is no video the assistant can read at that path "
            "(whether the file exists is not told here)"
        )
    if kind == "file upload" and upload:
        return message.replace(str(upload), Path(upload).name).replace(str(Path(upload).parent), "(upload)")
    return message
