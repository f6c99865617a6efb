"""The dashboard page's own files, served from the package (``static/``)."""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).with_name("static")
# Exactly these files are served from the package: no path from the request reaches the disk.
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "plot.js": "text/javascript; charset=utf-8",
    "sim2real.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self';"
    " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def static_file(name: str) -> tuple[bytes, str, dict[str, str]] | None:
    """(body, content type, extra headers) of page file ``name``, or None when it is not one."""
    ctype = STATIC_FILES.get(name)
    if ctype is None:
        return None
    body = (STATIC_DIR / name).read_bytes()
    extra = {"Cache-Control": "no-cache"}
    if name == "index.html":
        extra.update({"Content-Security-Policy": PAGE_CSP, "X-Frame-Options": "DENY"})
    return body, ctype, extra
