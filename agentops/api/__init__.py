"""The JSON API: session or bearer token; identity never comes from the body."""
