"""The operators' screens: the reconciliation queue (unclear writes a human settles)."""
