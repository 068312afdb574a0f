"""httpx2 (Pydantic's continuation of httpx, ``pip install httpx2``) as a :class:`Library` of
the httpx API: the same wrappers, tees of httpx2's own stream classes. Imported only when httpx2
is installed (see :func:`otel_a2a.instrumentation.libraries`)."""

from __future__ import annotations

import httpx2

from otel_a2a.instrumentation.httpx_client import AsyncTeeStream, Library, TeeStream


class _Httpx2Tee(TeeStream, httpx2.SyncByteStream):
    pass


class _Httpx2AsyncTee(AsyncTeeStream, httpx2.AsyncByteStream):
    pass


HTTPX2 = Library(httpx2, _Httpx2Tee, _Httpx2AsyncTee)
