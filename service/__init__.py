"""Switchyard over HTTP: `switchyard serve` runs `service.app.create_app` with uvicorn."""
