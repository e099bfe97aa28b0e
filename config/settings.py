"""Settings. The environment is read here and nowhere else."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.dbpool import check_pooled_connection
from config.devservers import read_state

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("AGENTOPS_VAR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def _service_urls() -> tuple[str, str]:
    """DATABASE_URL/REDIS_URL win; otherwise the embedded servers recorded by `make run`."""
    db, redis = os.environ.get("DATABASE_URL"), os.environ.get("REDIS_URL")
    if db and redis:
        return db, redis
    state = read_state(VAR_DIR) or {}
    db = db or state.get("database_url")
    redis = redis or state.get("redis_url")
    if not (db and redis):
        raise ImproperlyConfigured(
            "No database/Redis: the embedded servers are not running for this checkout. "
            "Start them with `make run` (or `make services`), or set DATABASE_URL and REDIS_URL."
        )
    return db, redis


DATABASE_URL, REDIS_URL = _service_urls()

# The profile: "development" (the default: `make run`, `make test`) or "production", which
# refuses to start with development secrets or DEBUG and turns on the TLS settings below.
PROFILE = os.environ.get("DJANGO_PROFILE", "development").strip().lower()
if PROFILE not in {"development", "production"}:
    raise ImproperlyConfigured(
        f"DJANGO_PROFILE must be development or production, not {PROFILE!r}."
    )
PRODUCTION = PROFILE == "production"
DEV_SECRET_KEY = "dev-only-insecure-key-change-me"
DEV_APPROVAL_SIGNING_KEYS = "k1:dev-only-approval-key"
SECRET_KEY = os.environ.get("SECRET_KEY", DEV_SECRET_KEY)
# Off unless a developer opts in: the debug pages show settings to whoever hits an error.
DEBUG = _env_bool("DEBUG", False)
ALLOWED_HOSTS = [
    h for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h
]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]
# Websockets are accepted only from these origins, matched exactly (scheme, host and port):
# by default the pages `make run` serves (HOST/PORT as config/run.py reads them).
_RUN_PORT = os.environ.get("PORT", "8000")
_RUN_HOSTS = {"127.0.0.1", "localhost", os.environ.get("HOST", "127.0.0.1")}
_RUN_HOSTS -= {"", "::", "0.0.0.0"}  # noqa: S104  (a wildcard bind is no origin)
WEBSOCKET_ALLOWED_ORIGINS = [
    o
    for o in os.environ.get(
        "WEBSOCKET_ALLOWED_ORIGINS",
        ",".join(f"http://{h}:{_RUN_PORT}" for h in sorted(_RUN_HOSTS)),
    ).split(",")
    if o
]
# Our sockets only talk to the page: a client frame over this many bytes closes it (1009).
WEBSOCKET_MAX_MESSAGE_BYTES = int(os.environ.get("WEBSOCKET_MAX_MESSAGE_BYTES", "4096"))
# Error reports (and the debug page a developer opts into) mask every secret and every URL.
DEFAULT_EXCEPTION_REPORTER_FILTER = "config.security.SecretsMaskedFilter"
# Request limits: headers (config.security.HeaderLimits, and uvicorn's own in config/run.py),
# JSON API bodies (agentops/api/views.py: 413 over the size, 400 past the depth or length).
MAX_REQUEST_HEADERS = int(os.environ.get("MAX_REQUEST_HEADERS", "100"))
MAX_REQUEST_HEADER_BYTES = int(os.environ.get("MAX_REQUEST_HEADER_BYTES", "32768"))
API_MAX_BODY_BYTES = int(os.environ.get("API_MAX_BODY_BYTES", "65536"))
API_MAX_JSON_DEPTH = int(os.environ.get("API_MAX_JSON_DEPTH", "16"))
API_MAX_STRING_CHARS = int(os.environ.get("API_MAX_STRING_CHARS", "4096"))

INSTALLED_APPS = [
    # First: its createsuperuser (the password validators on every path) wins over Django's.
    "accounts",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    "channels",
    "bookings",
    "agentops",
    "approvals",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Every HTML page's Content-Security-Policy (SECURE_CSP below), with a fresh nonce per page.
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "agentops.api.errors.ApiJsonErrorsMiddleware",  # outside the rest: sees every error page
    "config.security.RefuseNulInPath",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Where Django's docs put it: after sessions, before CommonMiddleware. The language is the
    # switcher's cookie when set, else the browser's Accept-Language, else LANGUAGE_CODE.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "accounts.middleware.HtmxLoginRedirectMiddleware",
    "accounts.middleware.SessionIdleTimeout",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
AUTH_USER_MODEL = "accounts.User"
# Every password form (the admin's add-user and change-password forms) and createsuperuser
# (accounts/management/commands) check these. 12 characters at least (OWASP ASVS 2.1.1), no
# composition rules; the demo logins pass them (tests/accounts/test_passwords.py).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": int(os.environ.get("PASSWORD_MIN_LENGTH", "12"))},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Sign-in throttling (accounts.throttle; README, "Deployment"). Failures of one account from one
# client (its address, or a browser that signed in to it before) within the window lock that
# pair, LOGIN_LOCKOUT_SECONDS doubled for each further lock within a day, at most
# LOGIN_LOCKOUT_MAX_SECONDS; failures from one address for any names lock the address. Past
# LOGIN_ACCOUNT_SLOW_AFTER failures of an account from all addresses, its password checks take
# turns LOGIN_ACCOUNT_DELAY_SECONDS apart: a delay, never a lock. A browser keeps its signed
# device cookie LOGIN_DEVICE_TRUST_DAYS.
LOGIN_MAX_FAILURES_PER_ACCOUNT = int(os.environ.get("LOGIN_MAX_FAILURES_PER_ACCOUNT", "5"))
LOGIN_MAX_FAILURES_PER_ADDRESS = int(os.environ.get("LOGIN_MAX_FAILURES_PER_ADDRESS", "20"))
LOGIN_FAILURE_WINDOW_SECONDS = int(os.environ.get("LOGIN_FAILURE_WINDOW_SECONDS", "900"))
LOGIN_LOCKOUT_SECONDS = int(os.environ.get("LOGIN_LOCKOUT_SECONDS", "60"))
LOGIN_LOCKOUT_MAX_SECONDS = int(os.environ.get("LOGIN_LOCKOUT_MAX_SECONDS", "3600"))
LOGIN_ACCOUNT_SLOW_AFTER = int(os.environ.get("LOGIN_ACCOUNT_SLOW_AFTER", "20"))
LOGIN_ACCOUNT_DELAY_SECONDS = float(os.environ.get("LOGIN_ACCOUNT_DELAY_SECONDS", "2"))
LOGIN_DEVICE_TRUST_DAYS = int(os.environ.get("LOGIN_DEVICE_TRUST_DAYS", "90"))
# Password checks at once per web process (each takes a core for a few hundred ms: PBKDF2), and
# how long a sign-in waits for a slot (or for its account's turn) before it is answered 503 (429).
# One per process leaves the other cores to everyone else; one more is kept for known browsers.
LOGIN_HASH_CONCURRENCY = int(os.environ.get("LOGIN_HASH_CONCURRENCY", "1"))
LOGIN_HASH_WAIT_SECONDS = float(os.environ.get("LOGIN_HASH_WAIT_SECONDS", "5"))


def _proxies(text: str) -> list[str]:
    try:
        return [
            str(ipaddress.ip_network(p.strip(), strict=False)) for p in text.split(",") if p.strip()
        ]
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"TRUSTED_PROXIES: {exc} (addresses or networks, comma-separated)"
        ) from exc


# The proxies whose X-Forwarded-For names the client (addresses or networks, comma-separated).
# Empty: no proxy is believed, the peer is the client (`make run`, whose uvicorn also ignores
# forwarded headers). Name only proxies that overwrite or append to the header.
TRUSTED_PROXIES = _proxies(os.environ.get("TRUSTED_PROXIES", ""))
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "bookings:search"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",  # csp_nonce for the few inline scripts
                "approvals.context_processors.approvals_nav",
                "console.operators.context_processors.operators_nav",
                "console.ops.context_processors.ops_nav",
            ],
        },
    },
]

# PostgreSQL connections are reused, never opened per request or per task. Under Django's own
# ASGI handler every request ran in a thread of its own (ThreadSensitiveContext), so a
# thread-local persistent connection (CONN_MAX_AGE) died with its thread: 50 requests opened 51
# sessions (config.handler now keeps its threads, but Celery's tool threads and MCP's come and go).
# A pool per process (psycopg_pool) hands the same sessions to every thread: Django returns the
# connection at the end of each request, task and tool call (close_old_connections) and takes
# it again on the next query. DB_POOL_MAX_SIZE=0 turns the pool off; CONN_MAX_AGE then applies
# (Django refuses a pool with persistent connections).
DB_POOL_MAX_SIZE = int(os.environ.get("DB_POOL_MAX_SIZE", "40"))
# The web server's request threads (config.handler). By default 8 fewer than the pool's sessions
# (at most 32), so the web's requests never wait for one: a request holds at most one session,
# from its first query to its end, and the 8 are for the other threads of the web process that
# query (MCP's calls run on asyncio's default pool, 6 threads on 2 cores).
WEB_THREADS = int(
    os.environ.get("WEB_THREADS")
    or (max(1, min(32, DB_POOL_MAX_SIZE - 8)) if DB_POOL_MAX_SIZE else 32)
)
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=0 if DB_POOL_MAX_SIZE else int(os.environ.get("CONN_MAX_AGE", "60")),
        conn_health_checks=_env_bool("DB_HEALTH_CHECKS", True),
    )
}
# Django's PostgreSQL backend with a last-in-first-out session pool (config/postgres/base.py).
DATABASES["default"]["ENGINE"] = "config.postgres"
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("TEST_DATABASE_NAME") or None}
DATABASES["default"]["OPTIONS"] = {}
if DB_POOL_MAX_SIZE:
    # Opened lazily in each process (after Celery's fork), min_size sessions kept warm; a
    # thread waits up to `timeout` seconds for a free one when all are out.
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": min(int(os.environ.get("DB_POOL_MIN_SIZE", "2")), DB_POOL_MAX_SIZE),
        "max_size": DB_POOL_MAX_SIZE,
        "timeout": float(os.environ.get("DB_POOL_TIMEOUT", "10")),
    }
    if _env_bool("DB_HEALTH_CHECKS", True):  # all idle sessions dead at once: replaced at once
        DATABASES["default"]["OPTIONS"]["pool"]["check"] = check_pooled_connection
# Server-side parameters with prepared statements: a hot statement (the reservation CTE, the
# runtime's bookkeeping) is planned once per connection instead of on every call; a pooled
# connection keeps its prepared statements from one checkout to the next. Turn off
# (DB_PREPARED_STATEMENTS=false) behind a transaction-pooling proxy such as PgBouncer.
if _env_bool("DB_PREPARED_STATEMENTS", True):
    DATABASES["default"]["OPTIONS"] |= {"server_side_binding": True, "prepare_threshold": 5}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "agentops",
    }
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # A consumer waits for its messages with BZPOPMIN for 5 s; redis-py's default read
        # timeout is also 5 s, so a busy process lost that race and the consumer with it (the
        # page's socket dropped; bench/trace_latency.py, `connections_lost`). Not much longer
        # either: a push that meets a connection Redis dropped in a restart waits this long
        # before the pool opens a new one (tests/chaos, test_redis_restarted_mid_run).
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": 10}],
            "prefix": "agentops:channels",
            # Messages waiting per socket before a push is dropped (the default, 100, dropped
            # the last events of a burst for a slow page, which then missed the reply).
            "capacity": 1000,
        },
    }
}

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
# Compiled (.mo) by the build from the committed .po files: `make compilemessages`.
LOCALE_PATHS = [BASE_DIR / "locale"]
# Our own date/time formats per language (the screens use named formats such as DATE_FORMAT).
FORMAT_MODULE_PATH = ["config.formats"]
TIME_ZONE = os.environ.get("TIME_ZONE", "Asia/Shanghai")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
SERVE_STATIC = _env_bool("SERVE_STATIC", DEBUG)  # `make run` turns it on for its web server

# --- booking rules ---
BOOKING_HORIZON_DAYS = int(os.environ.get("BOOKING_HORIZON_DAYS", "90"))
BOOKING_MAX_HOURS = int(os.environ.get("BOOKING_MAX_HOURS", "8"))
# Check-in (bookings/checkin.py): open this many minutes before the start, until this many after
# it; a booking not checked in by then is released by the beat task below. A series whose
# occurrences were released this many times in a row is released from then on.
BOOKING_CHECKIN_OPEN_MINUTES = int(os.environ.get("BOOKING_CHECKIN_OPEN_MINUTES", "10"))
BOOKING_CHECKIN_GRACE_MINUTES = int(os.environ.get("BOOKING_CHECKIN_GRACE_MINUTES", "15"))
BOOKING_SERIES_MISSED_CHECKINS = int(os.environ.get("BOOKING_SERIES_MISSED_CHECKINS", "3"))
BOOKING_RELEASE_SWEEP_SECONDS = float(os.environ.get("BOOKING_RELEASE_SWEEP_SECONDS", "60"))
# The domain of calendar event UIDs (<booking code>@<domain>): fixed once calendars subscribed.
CALENDAR_UID_DOMAIN = os.environ.get("CALENDAR_UID_DOMAIN", "rooms.localhost")

# --- Celery: at-least-once delivery; tasks are idempotent and take ids ---
CELERY_BROKER_URL = REDIS_URL
# kombu's Redis transport with its close after a lost broker fixed (config/broker.py).
CELERY_BROKER_TRANSPORT = "config.broker:Transport"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Redis redelivers an unacknowledged message after this; it must outlast the longest task.
CELERY_VISIBILITY_TIMEOUT = int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", "300"))
# A broker that restarts (with or without its data) must not leave a worker attached to a dead
# socket: idle connections are pinged every few seconds and reopened, reads and connects time
# out, and the worker retries the broker for ever instead of giving up after 100 tries.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
    "health_check_interval": 5,
    "socket_keepalive": True,
    "socket_connect_timeout": 5,
    "socket_timeout": 10,
    "retry_on_timeout": True,
}
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "agentops")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_SEND_TASK_EVENTS = False
# Celery's Django fix-up closes every database connection (and with a pool under prefork, the
# whole pool) before and after each task unless this is set; then it does so only every N
# tasks. config/celery.py gives connections back the way a request does instead.
CELERY_DB_REUSE_MAX = int(os.environ.get("CELERY_DB_REUSE_MAX", "1000"))
# Beat keeps its schedule in memory: the sweeper runs on a short interval, so nothing is lost by
# not persisting it, and the default shelve file (dbm.sqlite3 on Python 3.13) fails under the
# worker's embedded beat with "locking protocol", which stopped the sweeper in `make run`.
CELERY_BEAT_SCHEDULER = "celery.beat:Scheduler"
CELERY_BEAT_SCHEDULE = {
    "sweep-stuck-runs": {
        "task": "agentops.tasks.sweep_task",
        "schedule": float(os.environ.get("AGENT_SWEEP_SECONDS", "30")),
    },
    "expire-trace-payloads": {
        "task": "agentops.tasks.expire_trace_payloads_task",
        "schedule": float(os.environ.get("TRACE_RETENTION_SWEEP_SECONDS", "3600")),
    },
    "release-no-shows": {
        "task": "bookings.tasks.release_no_shows_task",
        "schedule": BOOKING_RELEASE_SWEEP_SECONDS,
    },
}
# Days a finished run keeps its request text and trace payloads (personal data); 0 = forever.
TRACE_PAYLOAD_RETENTION_DAYS = int(os.environ.get("TRACE_PAYLOAD_RETENTION_DAYS", "90"))

# --- agent runtime ---
AGENT_MODEL = os.environ.get("AGENT_MODEL", "rules")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OPENAI_MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
# The model path fit for a deployment (agentops/planners/openai_adapter.py): a request's time
# limit (a small model on two cores takes 30-80 s a step), the tokens it may write (one wrote
# 3,000), the SDK's own retries of a failed request, the process's requests in flight to the
# endpoint (0: no bound; 1 for a local server that answers one at a time), and whether a single
# tool call written as JSON in the message text is read as a proposal (it still passes the gate).
OPENAI_TIMEOUT_S = float(os.environ.get("OPENAI_TIMEOUT_S", "60"))
OPENAI_MAX_TOKENS = int(os.environ.get("OPENAI_MAX_TOKENS", "512"))
OPENAI_MAX_RETRIES = int(os.environ.get("OPENAI_MAX_RETRIES", "2"))
OPENAI_MAX_CONCURRENCY = int(os.environ.get("OPENAI_MAX_CONCURRENCY", "0"))
OPENAI_TEXT_TOOL_CALLS = os.environ.get("OPENAI_TEXT_TOOL_CALLS", "1").lower() not in (
    "0",
    "false",
    "no",
    "off",
)
APPROVAL_SIGNING_KEYS = os.environ.get("APPROVAL_SIGNING_KEYS", DEV_APPROVAL_SIGNING_KEYS)
AGENT_RATE_LIMIT_PER_MINUTE = int(os.environ.get("AGENT_RATE_LIMIT_PER_MINUTE", "60"))
# A tool's circuit (agentops/runtime/circuit.py): this many transient failures within the window
# open it, and its calls are refused at once for the cool-down.
TOOL_CIRCUIT_FAILURES = int(os.environ.get("TOOL_CIRCUIT_FAILURES", "5"))
TOOL_CIRCUIT_WINDOW_S = int(os.environ.get("TOOL_CIRCUIT_WINDOW_S", "30"))
TOOL_CIRCUIT_COOLDOWN_S = int(os.environ.get("TOOL_CIRCUIT_COOLDOWN_S", "30"))
AGENT_RUN_RATE_LIMIT_PER_MINUTE = int(os.environ.get("AGENT_RUN_RATE_LIMIT_PER_MINUTE", "20"))
AGENT_SWEEP_SECONDS = int(os.environ.get("AGENT_SWEEP_SECONDS", "30"))
# Queued work and running runs untouched this long are re-enqueued by the sweeper.
AGENT_STALE_AFTER_SECONDS = float(os.environ.get("AGENT_STALE_AFTER_SECONDS", "20"))
# Multiplies the backoff before a transient failure's retry (agentops/runtime/timing.py); tests
# that count retries set 0 to retry at once.
AGENT_RETRY_BACKOFF_SCALE = 1.0

# --- MCP (agentops/mcp): the server at /mcp, and the gateway to third-party MCP servers ---
# TEST ONLY, off by default: the username that unauthenticated MCP requests act as (the MCP
# conformance suite's client sends no Authorization header). Never set it in production.
MCP_INSECURE_DEMO_USER = os.environ.get("MCP_INSECURE_DEMO_USER", "")
# TEST ONLY, off by default: /mcp also serves the conformance suite's fixture tools, prompts and
# resources (agentops/mcp/conformance/), ungoverned. Only .ci/mcp-conformance sets it.
MCP_CONFORMANCE_FIXTURES = _env_bool("MCP_CONFORMANCE_FIXTURES", False)
# Third-party MCP servers behind the gateway: a JSON list (or `@path/to/file.json`) of
# {"name", "url" | "command": [...], "tools": {tool: patch}}; see README "MCP gateway".
MCP_GATEWAY_SERVERS = os.environ.get("MCP_GATEWAY_SERVERS", "")
# Where clients reach the product, for the protected-resource metadata of /mcp (RFC 9728) when
# a request's own Host is not one of ALLOWED_HOSTS.
MCP_PUBLIC_ORIGIN = os.environ.get(
    "MCP_PUBLIC_ORIGIN", f"http://{sorted(_RUN_HOSTS)[0]}:{_RUN_PORT}"
).rstrip("/")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}

# --- approvals ---
APPROVAL_DEADLINE_MINUTES = int(os.environ.get("APPROVAL_DEADLINE_MINUTES", "30"))
# A call whose effect has a start (a booking: ToolSpec.acts_at) waits for its approver until
# this long before that start, but never longer than the maximum, nor less than the minimum;
# a call without a start keeps APPROVAL_DEADLINE_MINUTES.
APPROVAL_LEAD_MINUTES = int(os.environ.get("APPROVAL_LEAD_MINUTES", "15"))
APPROVAL_DEADLINE_MAX_HOURS = int(os.environ.get("APPROVAL_DEADLINE_MAX_HOURS", "72"))
APPROVAL_DEADLINE_MIN_MINUTES = int(os.environ.get("APPROVAL_DEADLINE_MIN_MINUTES", "5"))
# How long a signed approval stays usable after the decision (never past the request deadline).
APPROVAL_VALID_MINUTES = int(os.environ.get("APPROVAL_VALID_MINUTES", "10"))
# Approvers cannot be flooded: a person may have this many requests waiting at once and open
# this many an hour; a high-risk call past either is refused (rate_limited) before anything is
# recorded or mailed.
APPROVAL_PENDING_PER_REQUESTER = int(os.environ.get("APPROVAL_PENDING_PER_REQUESTER", "5"))
APPROVAL_REQUESTS_PER_HOUR = int(os.environ.get("APPROVAL_REQUESTS_PER_HOUR", "20"))
# Approvers get at most one mail per this many seconds: a request opened when none was mailed
# within it is mailed at once; the ones that follow wait for the window's end and go together,
# one mail per approver listing them (sent by the beat task below).
APPROVAL_MAIL_WINDOW_SECONDS = float(os.environ.get("APPROVAL_MAIL_WINDOW_SECONDS", "60"))
CELERY_BEAT_SCHEDULE["approvers-mail"] = {
    "task": "approvals.tasks.approvers_mail_task",
    "schedule": max(1.0, APPROVAL_MAIL_WINDOW_SECONDS / 4),
}

# --- mail (approval notifications): the console in development, SMTP in production ---
_MAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if PRODUCTION
    else "django.core.mail.backends.console.EmailBackend",
)
_MAIL_OPTIONS: dict[str, object] = {}
if _MAIL_BACKEND.endswith("smtp.EmailBackend"):
    _MAIL_OPTIONS = {
        "host": os.environ.get("EMAIL_HOST", "localhost"),
        "port": int(os.environ.get("EMAIL_PORT", "25")),
        "username": os.environ.get("EMAIL_HOST_USER", ""),
        "password": os.environ.get("EMAIL_HOST_PASSWORD", ""),
        "use_tls": _env_bool("EMAIL_USE_TLS", False),
        "timeout": 10,
    }
MAILERS = {"default": {"BACKEND": _MAIL_BACKEND, "OPTIONS": _MAIL_OPTIONS}}
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "rooms@localhost")


# --- TLS, cookies and sessions: on in production, each settable on its own ---
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", PRODUCTION)
CSRF_COOKIE_SECURE = _env_bool("CSRF_COOKIE_SECURE", PRODUCTION)
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", PRODUCTION)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000" if PRODUCTION else "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", PRODUCTION)
# The TLS proxy's header that says the client spoke HTTPS, as "Header-Name:value" (empty: none;
# set it only when the proxy always sets or strips that header).
_PROXY_SSL = os.environ.get(
    "SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto:https" if PRODUCTION else ""
)
SECURE_PROXY_SSL_HEADER = (
    (
        "HTTP_" + _PROXY_SSL.split(":", 1)[0].strip().upper().replace("-", "_"),
        _PROXY_SSL.split(":", 1)[1].strip(),
    )
    if ":" in _PROXY_SSL
    else None
)
# An idle session ends after this long (accounts.middleware.SessionIdleTimeout renews an active
# one at most every SESSION_RENEW_SECONDS, not on every request: one write per few minutes).
SESSION_COOKIE_AGE = int(
    os.environ.get("SESSION_IDLE_TIMEOUT_SECONDS", "1800" if PRODUCTION else "43200")
)
SESSION_RENEW_SECONDS = int(os.environ.get("SESSION_RENEW_SECONDS", "300"))

if PRODUCTION:
    _refused = [
        reason
        for reason, wrong in [
            ("DEBUG is on", DEBUG),
            (
                "SECRET_KEY is the development key or too weak (50+ characters)",
                SECRET_KEY == DEV_SECRET_KEY or len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5,
            ),
            (
                "APPROVAL_SIGNING_KEYS holds the development key",
                "dev-only" in APPROVAL_SIGNING_KEYS
                or APPROVAL_SIGNING_KEYS == DEV_APPROVAL_SIGNING_KEYS,
            ),
            ("MCP_INSECURE_DEMO_USER is set", bool(MCP_INSECURE_DEMO_USER)),
            ("MCP_CONFORMANCE_FIXTURES is on", MCP_CONFORMANCE_FIXTURES),
        ]
        if wrong
    ]
    if _refused:
        raise ImproperlyConfigured(
            "DJANGO_PROFILE=production refuses to start: " + "; ".join(_refused) + "."
        )

# --- Content-Security-Policy of the pages (Django's middleware; static files and /mcp get a
# stricter one from config.security.SecurityHeaders). Scripts and styles come from this origin
# only, or carry the page's nonce (the inbox's socket script, htmx's indicator style); nothing
# inline otherwise, no eval (htmx runs with allowEval off), sockets to this origin only, no
# framing, forms post here only.
from django.utils.csp import CSP  # noqa: E402

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF, CSP.NONCE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "font-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
