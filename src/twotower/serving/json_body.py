"""Request bodies read as JSON whose objects name each key once (:mod:`twotower.utils.unique_keys`).

FastAPI reads a body with ``json.loads``, which keeps a repeated key's last value: ``{"user_id": "1", "k": 5,
"k": 500}`` was answered with 500 items and no word about the 5. A route of :class:`UniqueKeysRoute` reads its
body with :func:`~twotower.utils.unique_keys.loads_unique`; the refusal is the 400 of a body that cannot be read
(``errors._unparsable_body`` says which key).
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from twotower.utils.unique_keys import loads_unique

__all__ = ["UniqueKeysRoute"]


class _UniqueKeysRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads_unique(await self.body())
        return self._json


class UniqueKeysRoute(APIRoute):
    """An ``APIRoute`` whose JSON body refuses a key repeated in one object."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        handler = super().get_route_handler()

        async def unique_keys_handler(request: Request) -> Response:
            return await handler(_UniqueKeysRequest(request.scope, request.receive))

        return unique_keys_handler
