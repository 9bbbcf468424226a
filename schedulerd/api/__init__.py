"""The HTTP API and dashboard, served by the daemon's own event loop."""

from schedulerd.api.app import create_app, create_ops_app
from schedulerd.api.server import serve_api

__all__ = ["create_app", "create_ops_app", "serve_api"]
