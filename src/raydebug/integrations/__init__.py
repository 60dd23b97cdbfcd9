"""Integrations with cluster engines. Each module may import its engine; nothing else may."""
