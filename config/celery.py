from __future__ import annotations

import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("agentops")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.task_prerun.connect
@signals.task_postrun.connect
def _release_connections(task: object = None, **kwargs: object) -> None:
    """What Django does around a request: drop broken or expired connections and give pooled
    ones back (CONN_MAX_AGE=0 with a pool), so that the next task takes a warm session. Not
    for a task run eagerly, inside its caller's transaction."""
    if getattr(getattr(task, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
