"""The broker transport (config/broker.py): after a worker lost Redis, the channel of the
collected connection is used again, to close it a second time and to acknowledge a task that
finished during the outage. kombu's own channel raises AttributeError there, which stopped the
worker for good (tests/chaos, a Redis restart); ours raises a connection error, which kombu and
Celery handle, and the unacknowledged message stays in Redis for the visibility timeout."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.conf import settings
from kombu import Connection
from kombu.transport import redis as kombu_redis

from config.celery import app


def _detached_connection(transport: str | None) -> tuple[Connection, str, Any]:
    """A connection with one message delivered and not acknowledged, then half closed the way
    Celery collects a connection whose broker went away: the channel's pools are let go and the
    transport loses its client, while the channel stays open."""
    conn = Connection(settings.CELERY_BROKER_URL, transport=transport)
    channel = conn.default_channel
    tag = f"test-broker-{id(conn)}"
    payload = channel.prepare_message(
        "{}",
        content_type="application/json",
        properties={
            "delivery_tag": tag,
            "delivery_info": {"exchange": "", "routing_key": "test-broker"},
        },
    )
    message = channel.message_to_python(payload)
    channel.qos.append(message, tag)
    channel._disconnect_pools()
    conn._do_close_transport()
    return conn, tag, message


def test_kombus_own_channel_raises_on_that_second_close():
    """The fault this transport exists for, still in the kombu this project installs: when a
    kombu release fixes it, this test says so and config/broker.py can go."""
    conn, tag, message = _detached_connection(None)
    try:
        with pytest.raises(AttributeError):
            message.ack_log_error(logging.getLogger(__name__), conn.connection_errors)
        with pytest.raises(AttributeError):
            conn.close()
    finally:
        _forget(tag)


def test_our_channel_acknowledges_as_not_made_closes_and_leaves_the_message_to_be_restored(caplog):
    conn, tag, message = _detached_connection(settings.CELERY_BROKER_TRANSPORT)
    try:
        message.ack_log_error(logging.getLogger("test_broker"), conn.connection_errors)
        assert "Couldn't ack" in caplog.text  # what Celery logs for any lost broker
        conn.close()  # no exception
        assert conn.connected is False
        unacked = _redis().hget(kombu_redis.Channel.unacked_key, tag)
        assert unacked is not None  # still there: the visibility timeout puts it back
    finally:
        _forget(tag)


def test_the_workers_and_the_web_use_it():
    with app.connection_for_read() as read, app.connection_for_write() as write:
        for conn in (read, write):
            assert isinstance(conn.default_channel, _our_channel())


def test_a_channel_builds_one_redis_client_per_pool_and_a_new_one_after_letting_it_go():
    queue = f"test-broker-client-{id(object())}"
    with Connection(settings.CELERY_BROKER_URL, transport=settings.CELERY_BROKER_TRANSPORT) as conn:
        channel = conn.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second  # kombu's own builds one per publish, delivery and ack
        try:
            channel._put(queue, {"body": "one"})
            assert channel._get(queue)["body"] == "one"  # the shared client publishes and reads

            channel._disconnect_pools()  # as kombu does when the connection is collected
            with channel.conn_or_acquire() as after:
                assert after is not first and after.connection_pool is channel.pool
            channel._put(queue, {"body": "two"})
            assert channel._get(queue)["body"] == "two"
        finally:
            _redis().delete(queue)


def _our_channel() -> type:
    from config.broker import Channel

    return Channel


def _redis():
    from agentops.runtime.redis_client import get_redis

    return get_redis()


def _forget(tag: str) -> None:
    redis = _redis()
    redis.hdel(kombu_redis.Channel.unacked_key, tag)
    redis.zrem(kombu_redis.Channel.unacked_index_key, tag)
