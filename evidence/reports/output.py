"""Writing what the analyst renders: whole or not at all."""

import os
import tempfile
from pathlib import Path


def replace_text(path: Path, text: str) -> None:
    """Replace path's content atomically: a reader sees the old file or the new, never
    half. A new file is 0600 (pages and entries name hosts and processes); a file that
    was there keeps its mode."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
