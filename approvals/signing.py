"""HMAC-SHA256 signatures under key ids. APPROVAL_SIGNING_KEYS is "id:secret[,id:secret...]":
the first key signs, every listed key verifies, so a rotation keeps old records verifiable."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from django.conf import settings


class UnknownKeyError(Exception):
    pass


def _keys() -> list[tuple[str, bytes]]:
    keys = []
    for item in str(settings.APPROVAL_SIGNING_KEYS).split(","):
        key_id, _, secret = item.strip().partition(":")
        if key_id and secret:
            keys.append((key_id, secret.encode()))
    if not keys:
        raise UnknownKeyError("APPROVAL_SIGNING_KEYS holds no key")
    return keys


def canonical(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sign(payload: dict[str, Any]) -> tuple[str, str]:
    key_id, secret = _keys()[0]
    return key_id, hmac.new(secret, canonical(payload), hashlib.sha256).hexdigest()


def verify(payload: dict[str, Any], *, key_id: str, signature: str) -> bool:
    secret = dict(_keys()).get(key_id)
    if secret is None:
        raise UnknownKeyError(key_id)
    expected = hmac.new(secret, canonical(payload), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)
