"""Property test: any body sqsbatch can send round-trips through S3, in the pointer format."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from sqsbatch._core.bodies import decode_body, encode_body
from sqsbatch._core.payloads import Offload, is_pointer, parse_pointer
from sqsbatch._core.sending import SendPlan
from sqsbatch.errors import MessageError
from tests.support.fuzzing import FUZZ, values

URL = "https://sqs.local/1/q"
bodies = values | st.text() | st.binary() | st.text(min_size=1).map(lambda t: t * 50)


def plan(body: Any, **offload: Any) -> SendPlan:
    counter = itertools.count()
    return SendPlan(
        URL,
        [{"body": body}],
        batch_delay=None,
        default_delay=None,
        wall_now=0.0,
        large=(Offload("bkt", **offload), lambda: f"key-{next(counter)}"),
    )


@FUZZ
@given(bodies)
def test_any_body_round_trips_through_an_offload(body: Any) -> None:
    try:
        text, content_type = encode_body(body)
    except MessageError:
        assume(False)  # refused on send, with or without S3
    # Given the body sent through S3 (a fake S3: the key's bytes)
    sent = plan(body, always=True)
    s3 = {upload.key: upload.data for upload in sent.uploads}
    (entry,) = sent.entries(URL, content_dedup=False)
    attributes = entry.params["MessageAttributes"]
    # When a consumer reads the pointer and fetches its object
    assert is_pointer(attributes)
    pointer = parse_pointer(entry.params["MessageBody"], attributes)
    fetched = s3[pointer.key].decode("utf-8")
    # Then it has the body as sent without S3, and the size attribute says its bytes
    assert fetched == text
    assert decode_body(fetched, content_type) == decode_body(text, content_type)
    assert attributes["ExtendedPayloadSize"]["StringValue"] == str(len(s3[pointer.key]))
