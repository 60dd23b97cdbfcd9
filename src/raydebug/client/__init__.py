"""Clients of the hub: a DAP client library (``dap``) and the HTTP API (``hub_api``)."""
