"""Integrations with cluster engines. Each package (``ray/``) may import its engine; nothing
else may. An integration may import the agent (and install its discovery there); the agent
never imports an integration."""
