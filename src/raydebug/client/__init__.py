"""Clients of the hub: a DAP client library and the HTTP API."""
