"""The API docs pages, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served from this machine when possible.

FastAPI's own pages load Swagger UI and ReDoc from a CDN (and ReDoc Google Fonts): on a machine without internet
``/docs`` was blank ("SwaggerUIBundle is not defined"), and the pages had to be let run any script
(:data:`~twotower.serving.middleware.DOCS_CSP`). The ``fastapi-offline`` package (a dependency) ships Swagger
UI 5 and ReDoc 2 as static files: when it is installed they are served under :data:`ASSETS_URL`, and each page
gets a strict policy that allows its own files, its inline start-up script by hash (computed from the HTML
actually served, at app build) and fetches to this origin only. Without it the CDN pages stay, and the start-up
line says so (:func:`docs_note`).

(``swagger-ui-bundle`` 1.1.0, the other packaged Swagger UI, ships Swagger UI 4.15.5: it answers FastAPI's
OpenAPI 3.1 document with "Unable to render this definition".)
"""
from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_URL", "local_assets", "install_docs", "docs_note", "inline_hashes"]

#: where the local Swagger UI / ReDoc files are served (under /docs, not /static: the explorer's /static mount
#: would shadow a mount below it)
ASSETS_URL = "/docs/assets"
_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")
#: the framing, base and plugin parts every docs policy keeps (as DOCS_CSP has them)
_BASE = "base-uri 'none'; object-src 'none'; frame-ancestors 'none'; form-action 'self'"


def local_assets() -> Path | None:
    """The folder of ``fastapi-offline``'s Swagger UI and ReDoc files, or None when it is not installed."""
    try:
        import fastapi_offline
    except ImportError:
        return None
    folder = Path(fastapi_offline.__file__).parent / "static"
    return folder if all((folder / f).is_file() for f in _FILES) else None


def inline_hashes(html: str, tag: str) -> list[str]:
    """CSP source expressions (``'sha256-...'``) for the inline ``<tag>`` elements of ``html`` (those without
    ``src``): the exact text between the tags, as the browser hashes it."""
    bodies = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.S)
    return [f"'sha256-{base64.b64encode(hashlib.sha256(b.encode()).digest()).decode()}'" for b in bodies]


def _swagger_page(app: FastAPI) -> tuple[str, str]:
    page = get_swagger_ui_html(
        openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - Swagger UI",
        swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js", swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        # no badge image from Swagger's online validator (it would send the spec's address to another site)
        swagger_ui_parameters={"validatorUrl": None})
    html = bytes(page.body).decode()
    # Swagger UI sets element styles through React (CSSOM, which style-src does not govern): no 'unsafe-inline'
    csp = (f"default-src 'none'; script-src 'self' {' '.join(inline_hashes(html, 'script'))}; style-src 'self'; "
           f"img-src 'self' data:; connect-src 'self'; {_BASE}")
    return html, csp


def _redoc_page(app: FastAPI) -> tuple[str, str]:
    page = get_redoc_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - ReDoc",
                          redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js", redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
                          with_google_fonts=False)
    html = bytes(page.body).decode()
    # ReDoc styles itself by inserting <style> elements (styled-components), so its styles need 'unsafe-inline'
    # (which a hash beside it would switch off); its search index runs in a Worker made from a blob: URL
    csp = (f"default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
           f"font-src 'self' data:; connect-src 'self'; worker-src blob:; {_BASE}")
    return html, csp


def install_docs(app: FastAPI, folder: Path) -> None:
    """Serve ``/docs`` and ``/redoc`` from ``folder`` (:func:`local_assets`), each page with its own policy (which
    :class:`~twotower.serving.middleware.SecurityHeaders` keeps); the app is built with ``docs_url=None,
    redoc_url=None``."""
    app.mount(ASSETS_URL, StaticFiles(directory=folder), name="docs-assets")
    swagger, redoc = _swagger_page(app), _redoc_page(app)  # built once: the hash is of the page served

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return HTMLResponse(swagger[0], headers={"Content-Security-Policy": swagger[1]})

    @app.get("/redoc", include_in_schema=False)
    async def redoc_ui() -> HTMLResponse:
        return HTMLResponse(redoc[0], headers={"Content-Security-Policy": redoc[1]})


def docs_note() -> str:
    """How the start-up line names the docs: local, or what they need."""
    if local_assets() is not None:
        return "docs at /docs and /redoc"
    return ("docs at /docs and /redoc (their pages load Swagger UI and ReDoc from a CDN, so they need internet; "
            "`pip install fastapi-offline` serves them from this machine)")
