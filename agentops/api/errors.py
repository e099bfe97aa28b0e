"""Everything under /api/ answers JSON, refusals of the URL resolver and of method decorators
included, never an HTML page."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

_CODES = {
    400: ("bad_request", "The request could not be read."),
    403: ("forbidden", "Not allowed."),
    404: ("not_found", "There is nothing here."),
    405: ("method_not_allowed", "This method is not allowed here."),
    413: ("too_large", "The request body is too large."),
    500: ("server_error", "Something went wrong on our side; nothing was changed by it."),
}


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def json_error(status: int) -> JsonResponse:
    code, message = _CODES.get(status, ("error", "The request failed."))
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


class ApiJsonErrorsMiddleware:
    """An HTML (or empty) error response under /api/ becomes the JSON error of its status."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            is_api(request)
            and response.status_code >= 400
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            allow = response.get("Allow")
            response = json_error(response.status_code)
            if allow:
                response["Allow"] = allow
        return response
