"""The HTTP API (`/api/v1/...`, OpenAPI schema at /api/v1/openapi.json) and the OpenAI-compatible chat (`/v1/...`):
one file per resource group; `api.server` builds them for the page's server (--ui) or alone (--api)."""
