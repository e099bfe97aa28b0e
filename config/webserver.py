"""The HTTP protocol `make run`'s uvicorn speaks: httptools, with a bound on a request's head.

uvicorn offers two HTTP/1.1 parsers. h11 (pure Python) refuses a head past a size it is given,
but cost the web process ~1.5 ms of CPU per request on the 2-core machine, as much as the rest
of a `GET /api/tools` (bench/README.md, "API reads"). httptools (C) costs a fraction of that, but
buffers a header of any length: a 4 MB header was read whole before the app could refuse it.
This protocol is httptools that counts the bytes of a request's head as they arrive and, past
`MAX_HEAD_BYTES` without the head ending, answers 431 and closes the connection, so no
connection holds more than the bound plus one read of the socket.
`config.security.HeaderLimits` still caps the number and total size of the headers of whatever
server runs the app.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

MAX_HEAD_BYTES = 32768  # request line + headers; larger than any browser or client sends
# The 431 body, from this bound and from config.security.HeaderLimits (number and total size).
HEADERS_TOO_LARGE = (
    b'{"error": {"code": "headers_too_large", '
    b'"message": "The request headers are too many or too large."}}'
)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    _in_head = True  # from the end of one message to the end of the next one's headers
    _head_ended = False  # during this read
    _head_bytes = 0

    def data_received(self, data: bytes) -> None:
        counting, self._head_ended = self._in_head, False
        super().data_received(data)
        # Only a read that arrived inside a head and left it unfinished counts: the read that
        # ends a head, a body's reads and the one that ends a body (and may start the next
        # head) do not. The bound is on what waits for more, give or take one read.
        if not counting or self._head_ended or not self._in_head or self.transport.is_closing():
            return
        self._head_bytes += len(data)
        if self._head_bytes > MAX_HEAD_BYTES:
            self.transport.write(
                b"".join(
                    [
                        STATUS_LINE[431],
                        b"content-type: application/json\r\n",
                        b"content-length: %d\r\n" % len(HEADERS_TOO_LARGE),
                        b"connection: close\r\n\r\n",
                        HEADERS_TOO_LARGE,
                    ]
                )
            )
            self.transport.close()

    def on_headers_complete(self) -> None:
        self._in_head, self._head_ended, self._head_bytes = False, True, 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
