"""Switchyard over HTTP: `cli.py serve` runs `service.app.create_app` with uvicorn."""
