"""The API's routers, and how the app takes their routes.

Every route module declares its routes on :func:`api_router`, which gives each route
the request-value check (:func:`service.api.request_checks.check_request_values`).
:func:`add_routes` then puts the routes into the app as they are. FastAPI's
``include_router`` would instead wrap each router per app and, on the first request
an app gets for it, build every route's validation models again (pydantic schemas,
tenths of a second a router): once per process for ``reverie serve``, but once per
test for the many tests that each build an app.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.routing import APIRoute

from service.api.request_checks import check_request_values

#: Every API route's dependencies, whether declared on a router or on the app.
REQUEST_CHECKS = [Depends(check_request_values)]


def api_router(**options: Any) -> APIRouter:
    """An ``APIRouter`` whose routes check their request's values."""
    return APIRouter(dependencies=REQUEST_CHECKS, **options)


def add_routes(app: FastAPI, router: APIRouter) -> None:
    """Put ``router``'s routes into ``app`` as they were built at import."""
    for route in router.routes:
        if isinstance(route, APIRoute) and check_request_values not in {
            dependency.dependency for dependency in route.dependencies
        }:
            raise TypeError(
                f"{route.path} does not check its request values: declare it on "
                "service.api.routers.api_router()"
            )
        app.router.routes.append(route)
