"""How approvals announces decisions without importing the runtime: the runtime subscribes.

``approval_settled`` is sent after commit with ``request`` (an ApprovalRequest whose status is
approved, rejected, expired or withdrawn)."""

from __future__ import annotations

from django.dispatch import Signal

approval_settled = Signal()

# Sent after commit with ``request`` (a pending ApprovalRequest) when a request is opened: the
# requester's open screens learn that it waits, as they learn of its decision later.
approval_opened = Signal()

# Sent after commit with ``request`` (a stale request) when an approver asks to decide the same
# intent again against the current state: the runtime opens a fresh request with a new binding.
approval_refresh_requested = Signal()
