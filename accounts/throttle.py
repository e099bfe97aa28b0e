"""Sign-in throttling, counted in Redis so that every web process shares it.

After django-axes' lockout by user and address together, and OWASP's authentication cheat
sheet, no one can lock an account for its owner:

- **the pair**: failures of one account (the username as typed, case-folded, whether or not
  such an account exists: the answer never tells which) from one client, within a window. Past
  LOGIN_MAX_FAILURES_PER_ACCOUNT that pair is locked; each further lock of it within a day lasts
  twice as long, up to a cap. The same account from another address is not locked.
- **the address**: failures from one address for any names; past LOGIN_MAX_FAILURES_PER_ADDRESS
  the address is locked (a guesser of many names), for every name it tries.
- **the account**, slower and never a lock: past LOGIN_ACCOUNT_SLOW_AFTER failures from all
  addresses in the window, its password checks take turns, LOGIN_ACCOUNT_DELAY_SECONDS apart;
  a sign-in waits for its turn (at most LOGIN_HASH_WAIT_SECONDS; further off, it is told when
  to come back).
- **a known browser**: one that signed in to the account before carries a signed device cookie
  for it (OWASP's device cookies). It is its own client in the pair, is not held by the
  address's lock or the account's turns, and has a hashing slot kept for it: a guessing storm
  does not keep the owner out of their own browser.

A locked or too-early sign-in is refused before the password is hashed, so a guesser costs no
CPU. A right password that the door refuses anyway (a non-staff person at /admin/login/) is not
a failure. Hashing itself is bounded per process: password hashing is deliberately slow, and
unbounded it took the cores from every other request.

The client's address is the peer's, unless the peer is one of TRUSTED_PROXIES: then it is the
last address in X-Forwarded-For that no trusted proxy added. Redis not answering fails closed
(sign-in refused for now), as the runtime's limiter does.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import ipaddress
import secrets
import threading
import time
from dataclasses import dataclass
from enum import IntEnum

import redis
from django.conf import settings
from django.core import signing
from django.http import HttpRequest
from redis.exceptions import RedisError

STRIKES_TTL_S = 86400  # how long earlier locks count towards the next one's length
DEVICE_COOKIE = "signin_device"
DEVICE_SALT = "accounts.throttle.device"
DEVICE_ACCOUNTS = 5  # accounts one browser is known for (the oldest is forgotten first)
PREFIX = "accounts:login"

# Take the account's next turn: a turn is LOGIN_ACCOUNT_DELAY_SECONDS after the one before.
# Returns the wait in ms, or minus it when the turn is further off than the caller may wait
# (then no turn is taken). Redis' clock, so that every web host counts on the same one.
_TAKE_TURN = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = math.max(now, tonumber(redis.call('GET', KEYS[1]) or '0'))
local wait = at - now
if wait > tonumber(ARGV[2]) then return -wait end
redis.call('SET', KEYS[1], at + tonumber(ARGV[1]), 'PX', wait + tonumber(ARGV[1]) + 1000)
return wait
"""


@functools.cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)


class ThrottleUnavailableError(Exception):
    """Redis did not answer: nobody signs in uncounted."""


@dataclass(frozen=True)
class SignInClient:
    """Who is signing in: the address, and the device id when the browser is known for the
    account being signed in to."""

    address: str
    device: str = ""

    @property
    def pair_key(self) -> str:
        return f"device:{self.device}" if self.device else (self.address or "unknown")

    @property
    def scope(self) -> str:
        return "device" if self.device else "pair"


@dataclass(frozen=True)
class Lock:
    scope: str  # "pair" | "device" | "address"
    retry_after_s: int


@dataclass(frozen=True)
class Standing:
    """What the counts say of a sign-in before its password is checked."""

    lock: Lock | None
    account_failures: int  # of the account, from every address, in the window
    address_failures: int


@dataclass(frozen=True)
class Failure:
    """What one failed sign-in led to: the lock it set, if it set one."""

    locked: Lock | None


class Priority(IntEnum):
    """Who hashes first when the slots are taken: a known browser, then an address without
    recent failures, then the rest."""

    TRUSTED = 0
    CLEAN = 1
    SUSPECT = 2


def _subject(username: str) -> str:
    return hashlib.sha256(username.strip().casefold().encode("utf-8", "surrogatepass")).hexdigest()


def _keys(base: str) -> tuple[str, str, str]:
    return f"{base}:failures", f"{base}:lock", f"{base}:strikes"


def _pair(username: str, client: SignInClient) -> str:
    return f"{PREFIX}:pair:{_subject(username)}:{client.pair_key}"


def _address(address: str) -> str:
    return f"{PREFIX}:address:{address or 'unknown'}"


def _account(username: str) -> str:
    return f"{PREFIX}:account:{_subject(username)}"


# --- the client ------------------------------------------------------------------------------------


@functools.cache
def _networks(
    proxies: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(p, strict=False) for p in proxies)


def _trusted(address: str, networks: tuple) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(request: HttpRequest) -> str:
    """The address a sign-in comes from: the peer, or, when the peer is a proxy the deployer
    named (TRUSTED_PROXIES), the last X-Forwarded-For hop no trusted proxy added. Addresses to
    the left of that one are what the client wrote itself and are never believed."""
    peer = request.META.get("REMOTE_ADDR", "")
    networks = _networks(tuple(settings.TRUSTED_PROXIES))
    if not networks or not _trusted(peer, networks):
        return peer
    client = peer
    for hop in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        try:
            client = str(ipaddress.ip_address(hop.strip()))
        except ValueError:
            break  # a hop no proxy of ours wrote: the last trusted one is as far as we can see
        if not _trusted(client, networks):
            break
    return client


def _devices(request: HttpRequest) -> dict[str, str]:
    raw = request.COOKIES.get(DEVICE_COOKIE, "")
    if not raw:
        return {}
    try:
        value = signing.loads(
            raw, salt=DEVICE_SALT, max_age=settings.LOGIN_DEVICE_TRUST_DAYS * 86400
        )
    except signing.BadSignature:
        return {}
    return value if isinstance(value, dict) else {}


def signin_client(request: HttpRequest, *, username: str) -> SignInClient:
    """The client of a sign-in to ``username``: its address, and its device id when the
    request carries a valid device cookie for that account."""
    device = _devices(request).get(_subject(username)[:32], "")
    return SignInClient(address=client_address(request), device=str(device))


def device_cookie(request: HttpRequest, *, username: str) -> str:
    """The device cookie's new value after ``username`` signed in from this browser: the
    account added (its device id kept if it had one), the oldest dropped past DEVICE_ACCOUNTS."""
    devices = _devices(request)
    subject = _subject(username)[:32]
    device = devices.pop(subject, "") or secrets.token_urlsafe(12)
    kept = list(devices.items())[-(DEVICE_ACCOUNTS - 1) :]
    return signing.dumps(dict([*kept, (subject, device)]), salt=DEVICE_SALT, compress=True)


# --- the counts ------------------------------------------------------------------------------------


def login_standing(*, username: str, client: SignInClient) -> Standing:
    """The lock that refuses this sign-in now (the longer one, if both), and the counts that
    decide its turn and its place in the hashing queue. A known browser is held by its own
    pair's lock only."""
    pair_lock, address_lock = _keys(_pair(username, client))[1], _keys(_address(client.address))[1]
    try:
        pipe = _redis().pipeline(transaction=False)
        pipe.ttl(pair_lock)
        pipe.ttl(address_lock)
        pipe.get(_keys(_account(username))[0])
        pipe.get(_keys(_address(client.address))[0])
        pair_ttl, address_ttl, account_failures, address_failures = pipe.execute()
    except RedisError as exc:
        raise ThrottleUnavailableError from exc
    locks = [Lock(scope=client.scope, retry_after_s=pair_ttl)] if pair_ttl > 0 else []
    if address_ttl > 0 and not client.device:
        locks.append(Lock(scope="address", retry_after_s=address_ttl))
    return Standing(
        lock=max(locks, key=lambda lock: lock.retry_after_s, default=None),
        account_failures=int(account_failures or 0),
        address_failures=int(address_failures or 0),
    )


def login_turn(*, username: str, client: SignInClient, standing: Standing) -> float:
    """Seconds to wait before this sign-in's password may be checked: 0 unless the account is
    past LOGIN_ACCOUNT_SLOW_AFTER failures and the browser is not known for it. Negative: the
    turn is further off than LOGIN_HASH_WAIT_SECONDS, minus the seconds until it."""
    if client.device or standing.account_failures < settings.LOGIN_ACCOUNT_SLOW_AFTER:
        return 0.0
    interval_ms = int(settings.LOGIN_ACCOUNT_DELAY_SECONDS * 1000)
    longest_ms = int(settings.LOGIN_HASH_WAIT_SECONDS * 1000)
    try:
        wait_ms = _redis().eval(
            _TAKE_TURN, 1, f"{_account(username)}:turn", interval_ms, longest_ms
        )
    except RedisError as exc:
        raise ThrottleUnavailableError from exc
    return int(wait_ms) / 1000


def hashing_priority(*, client: SignInClient, standing: Standing) -> Priority:
    if client.device:
        return Priority.TRUSTED
    return Priority.SUSPECT if standing.address_failures else Priority.CLEAN


def _count(client: redis.Redis, base: str, limit: int, scope: str) -> Lock | None:
    """Count one failure against ``base``; past ``limit`` lock it, LOGIN_LOCKOUT_SECONDS
    doubled for each earlier lock within a day, at most LOGIN_LOCKOUT_MAX_SECONDS."""
    failures_key, lock_key, strikes_key = _keys(base)
    # One statement per command, not chained: redis-py types a pipeline's commands as the
    # client's (they return the pipeline only at run time).
    pipe = client.pipeline(transaction=False)
    pipe.incr(failures_key)
    pipe.expire(failures_key, settings.LOGIN_FAILURE_WINDOW_SECONDS)
    failures, _ = pipe.execute()
    if failures < limit:
        return None
    pipe = client.pipeline(transaction=False)
    pipe.incr(strikes_key)
    pipe.expire(strikes_key, STRIKES_TTL_S)
    strikes, _ = pipe.execute()
    seconds = min(
        settings.LOGIN_LOCKOUT_SECONDS * 2 ** (strikes - 1), settings.LOGIN_LOCKOUT_MAX_SECONDS
    )
    pipe = client.pipeline(transaction=True)
    pipe.set(lock_key, scope, ex=seconds)
    pipe.delete(failures_key)
    pipe.execute()
    return Lock(scope=scope, retry_after_s=seconds)


def login_failed(*, username: str, client: SignInClient) -> Failure:
    """Count one wrong password: for the pair, for the address (not for a known browser: its
    owner's typing errors do not count towards locking everyone behind the same address) and
    for the account's slower bound. Lock the pair or the address past its limit."""
    try:
        r = _redis()
        found = [
            _count(
                r, _pair(username, client), settings.LOGIN_MAX_FAILURES_PER_ACCOUNT, client.scope
            )
        ]
        if not client.device:
            found.append(
                _count(
                    r, _address(client.address), settings.LOGIN_MAX_FAILURES_PER_ADDRESS, "address"
                )
            )
        account = _keys(_account(username))[0]
        pipe = r.pipeline(transaction=False)
        pipe.incr(account)
        pipe.expire(account, settings.LOGIN_FAILURE_WINDOW_SECONDS)
        pipe.execute()
    except RedisError as exc:
        raise ThrottleUnavailableError from exc
    locks = [lock for lock in found if lock is not None]
    return Failure(locked=max(locks, key=lambda lock: lock.retry_after_s, default=None))


def login_succeeded(*, username: str, client: SignInClient) -> None:
    """The right password: the pair's failures start again from nothing (the address's do not:
    one right password does not excuse a guesser's other names; nor do the account's: others
    may still be guessing)."""
    failures_key, _, strikes_key = _keys(_pair(username, client))
    with contextlib.suppress(RedisError):  # the count only errs towards locking sooner
        _redis().delete(failures_key, strikes_key)


def _glob(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def login_unlock(*, username: str = "", address: str = "") -> int:
    """Lift the locks and counts of an account (every pair of it, and its slower bound) and/or
    of an address (and every pair from it); how many keys went."""
    r = _redis()
    keys: list[bytes | str] = []
    if username:
        keys += r.scan_iter(f"{PREFIX}:pair:{_subject(username)}:*", count=1000)
        keys += [*_keys(_account(username)), f"{_account(username)}:turn"]
    if address:
        keys += r.scan_iter(f"{PREFIX}:pair:*:{_glob(address)}:*", count=1000)
        keys += _keys(_address(address))
    return int(r.delete(*keys)) if keys else 0


# --- hashing ---------------------------------------------------------------------------------------


class HashingSlots:
    """A bound on concurrent password checks, with a queue by Priority: a slot goes to the
    best waiting class first, and ``reserved`` slots more are kept for known browsers."""

    def __init__(self, *, shared: int, reserved: int) -> None:
        self.shared, self.reserved = shared, reserved
        self._in_use = 0
        self._waiting = dict.fromkeys(Priority, 0)
        self._changed = threading.Condition()

    def _free(self, priority: Priority) -> bool:
        limit = self.shared + (self.reserved if priority == Priority.TRUSTED else 0)
        ahead = any(self._waiting[p] for p in Priority if p < priority)
        return self._in_use < limit and not ahead

    def acquire(self, priority: Priority, *, timeout: float) -> bool:
        """Take a slot, waiting at most ``timeout`` seconds; whether one was taken."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._waiting[priority] += 1
            try:
                while not self._free(priority):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._changed.notify_all()  # those behind this one may go now
                        return False
                    self._changed.wait(remaining)
                self._in_use += 1
                return True
            finally:
                self._waiting[priority] -= 1

    def release(self) -> None:
        with self._changed:
            self._in_use -= 1
            self._changed.notify_all()


_hashing: HashingSlots | None = None
_hashing_lock = threading.Lock()


def hashing_slots() -> HashingSlots:
    """The process's bound on concurrent password checks: LOGIN_HASH_CONCURRENCY, and one more
    for known browsers."""
    global _hashing
    with _hashing_lock:
        if _hashing is None:
            _hashing = HashingSlots(shared=settings.LOGIN_HASH_CONCURRENCY, reserved=1)
        return _hashing
