"""Refusals the assistant gives and its callers (the page, the API, MQTT commands) turn into their own answers:
a 429, a 507, a result with a code. Kept on the bottom floor so the callers need not import the assistant."""

from __future__ import annotations


class AssistantBusy(ValueError):
    """A question was not queued because enough are already waiting; the person may try again."""


class AdmissionError(ValueError):
    """A stream does not fit; the message holds the arithmetic and what to lower."""
