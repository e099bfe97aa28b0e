"""Executing governed calls: invoking a tool (timeouts, faults) and the one recorder every channel uses."""
