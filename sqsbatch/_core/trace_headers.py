"""X-Ray's trace header as W3C trace context: no I/O, no OpenTelemetry.

SQS sets the `AWSTraceHeader` system attribute for producers that X-Ray traces. `xray_ids`
reads it as W3C trace and span ids (for the batch span's link, `sqsbatch._shell.tracing`), and
`xray_traceparent` writes it as a W3C `traceparent`, so that a copy sqsbatch re-sends (a
dead-lettered copy, a delay hop, a redriven message) keeps the link in its own attribute.
"""

from __future__ import annotations

import re

__all__ = ["xray_ids", "xray_traceparent"]

_XRAY_ROOT = re.compile(r"^1-([0-9a-fA-F]{8})-([0-9a-fA-F]{24})$")
_XRAY_SPAN = re.compile(r"^[0-9a-fA-F]{16}$")


def xray_ids(header: str) -> tuple[int, int, bool] | None:
    """(trace id, span id, sampled) of an X-Ray trace header as W3C reads them, or None.

    `Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1`: the trace id
    is the root's two hex parts joined (`5759e988bd862e3fe1be46a994272793`), the span id the
    parent's. A header without a parent (or with a zero id) names no span to link to.
    """
    fields: dict[str, str] = {}
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        fields[key.strip()] = value.strip()
    root = _XRAY_ROOT.match(fields.get("Root", ""))
    parent = fields.get("Parent", "")
    if root is None or not _XRAY_SPAN.match(parent):
        return None
    trace_id, span_id = int(root[1] + root[2], 16), int(parent, 16)
    if not trace_id or not span_id:
        return None
    return trace_id, span_id, fields.get("Sampled") == "1"


def xray_traceparent(header: str) -> str | None:
    """The W3C `traceparent` of the span an X-Ray trace header names, or None."""
    ids = xray_ids(header)
    if ids is None:
        return None
    trace_id, span_id, sampled = ids
    return f"00-{trace_id:032x}-{span_id:016x}-{'01' if sampled else '00'}"
