"""Django's ASGI handler, with each request's synchronous work done in one trip to a thread.

Every view and middleware of this project is synchronous. Django's own ASGI handler serves such
a request in three trips to a worker thread (the `request_started` receivers, the middleware
chain and view, `response.close()` with the `request_finished` receivers), and starts and joins
a new thread for every request (`ThreadSensitiveContext`). On the 2-core machine that machinery
cost about 1.5 ms of CPU per request, more than the rest of a `GET /api/tools` (bench/README.md,
"API reads"). Here the whole synchronous part runs in one call on a long-lived pool of threads:

- the request's database work, its `request_started`/`request_finished` receivers (which hand the
  connection back to the pool: `close_old_connections`) and the response's `close()` all happen
  on the same thread, in that order, as under WSGI;
- a streaming response over a synchronous iterator is read to the end on that thread and sent as
  one body, as Django's ASGI handler does with one too (`sync_to_async(list)`); an async iterator
  is streamed from the event loop, its thread-sensitive reads and the response's `close()` on
  one thread of the request's own (`ThreadSensitiveContext`, as in Django's handler);
- a client that disconnects mid-request is not waited for: the thread finishes its work (Django
  could not stop a synchronous view either) and the reply is dropped by the server.

An async view would still work (Django adapts it with `async_to_sync`), only slower.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from functools import cached_property
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.db import close_old_connections
from django.http import FileResponse, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.urls import set_script_prefix


class OneTripASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)

    @cached_property
    def executor(self) -> ThreadPoolExecutor:
        # Threads are started as requests need them and kept. WEB_THREADS is below the database
        # pool's size (settings), so the web's own requests never wait for a pooled session.
        return ThreadPoolExecutor(settings.WEB_THREADS, thread_name_prefix="web-request")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        with closing(body_file):
            set_script_prefix(get_script_prefix(scope))
            respond = sync_to_async(self.respond, thread_sensitive=False, executor=self.executor)
            response = await respond(scope, body_file)
            if not (isinstance(response, StreamingHttpResponse) and response.is_async):
                await self.send_response(response, send)
                return
            # An async iterator's thread-sensitive reads (the audit export's) all go to one
            # thread of this request, where the response is closed too (request_finished gives
            # that thread's database session back), as under Django's own handler.
            async with ThreadSensitiveContext():
                try:
                    await self.send_response(response, send)
                finally:
                    await sync_to_async(response.close, thread_sensitive=True)()

    def respond(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        """The response, with every synchronous step of the request done on this thread."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        created = self.create_request(scope, body_file)
        if created[0] is None:
            response = created[1]  # the 400 (or 413) for a request that could not be read
        else:
            response = self.get_response(created[0])
            # Set as Django's own ASGI handler does; the stubs do not declare this private name.
            response._handler_class = self.__class__  # type: ignore[attr-defined]
            if isinstance(response, FileResponse):
                response.block_size = self.chunk_size
        # Only a StreamingHttpResponse (a FileResponse among them) has `streaming` set.
        if isinstance(response, StreamingHttpResponse) and response.is_async:
            close_old_connections()  # the view's session; the iterator reads on its own thread
            return response
        try:
            if not isinstance(response, StreamingHttpResponse):
                return response
            # Not is_async, so a synchronous iterator (the stubs type both kinds of stream).
            body = b"".join(response.streaming_content)  # type: ignore[arg-type]
        finally:
            response.close()  # request_finished, even when reading the stream failed
        buffered = HttpResponse(body, status=response.status_code)
        buffered.headers, buffered.cookies = response.headers, response.cookies
        return buffered
