"""SNS and EventBridge envelopes (issue 31 item 4), on the pure core: `unwrap` on real-shaped
bodies (the examples of AWS's documentation), what it refuses, and screening with an envelope
(the inner message to the handler and to `body_model`, anything else dead-lettered as
`invalid_body`). No SQS here: the front ends are tests/front_ends/test_envelopes.py."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from sqsbatch._core.context import QueueContext
from sqsbatch._core.envelope import INVALID_BODY, Death, ErrorInfo
from sqsbatch._core.intake import Screening, nothing_to_take
from sqsbatch._core.ledger import Ledger
from sqsbatch._core.queue_settings import resolve_settings
from sqsbatch._core.screening import BodyModel, Screen, screen
from sqsbatch._core.unwrap import ENVELOPES, EnvelopeError, unwrap, wrap
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import MessageError
from tests.core.test_screening import SENT, delivery

# An SNS notification as SNS delivers it to a subscribed queue without raw message delivery
# ("Amazon SNS message and JSON formats", HTTP/HTTPS notification JSON format).
SNS_NOTIFICATION = """{
  "Type" : "Notification",
  "MessageId" : "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
  "TopicArn" : "arn:aws:sns:us-west-2:123456789012:MyTopic",
  "Subject" : "My First Message",
  "Message" : "Hello world!",
  "Timestamp" : "2012-05-02T00:54:06.655Z",
  "SignatureVersion" : "1",
  "Signature" : "EXAMPLEw6JRN...",
  "SigningCertURL" : "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem",
  "UnsubscribeURL" : "https://sns.us-west-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-west-2:123456789012:MyTopic:c9135db0-26c4-47ec-8998-413945fb5a96",
  "MessageAttributes" : {
    "Test" : {"Type":"String","Value":"TestString"},
    "TestBinary" : {"Type":"Binary","Value":"TestBinary"}
  }
}"""

# An EventBridge event as a rule's SQS target receives it ("Amazon EventBridge events").
EVENTBRIDGE_EVENT = """{
  "version": "0",
  "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
  "detail-type": "EC2 Instance State-change Notification",
  "source": "aws.ec2",
  "account": "111122223333",
  "time": "2017-12-22T18:43:48Z",
  "region": "us-west-1",
  "resources": [
    "arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0"
  ],
  "detail": {
    "instance-id": " i-1234567890abcdef0",
    "state": "terminated"
  }
}"""


CONTEXT = QueueContext.of("q", resolve_settings("q", ConsumerConfig(), {}), None)


def sns(message: str, **changes: Any) -> str:
    return json.dumps(json.loads(SNS_NOTIFICATION) | {"Message": message} | changes)


def test_an_sns_notification_gives_its_message_and_its_fields() -> None:
    opened = unwrap("sns", SNS_NOTIFICATION)
    assert opened.body == "Hello world!"
    assert opened.fields["TopicArn"] == "arn:aws:sns:us-west-2:123456789012:MyTopic"
    assert opened.fields["Subject"] == "My First Message"
    assert opened.fields["MessageAttributes"]["Test"] == {"Type": "String", "Value": "TestString"}
    assert "Message" not in opened.fields  # the inner message is the body, not a field
    with pytest.raises(TypeError):
        opened.fields["Subject"] = "changed"  # type: ignore[index]


def test_an_sns_message_of_json_text_is_its_json_value() -> None:
    assert unwrap("sns", sns('{"order": 7, "items": [1, 2]}')).body == {"order": 7, "items": [1, 2]}
    assert unwrap("sns", sns("not json {")).body == "not json {"
    assert unwrap("sns", sns("[" * 100_000)).body == "[" * 100_000  # past the parser's depth


def test_an_eventbridge_event_gives_its_detail_and_its_fields() -> None:
    opened = unwrap("eventbridge", EVENTBRIDGE_EVENT)
    assert opened.body == {"instance-id": " i-1234567890abcdef0", "state": "terminated"}
    assert opened.fields["source"] == "aws.ec2"
    assert opened.fields["detail-type"] == "EC2 Instance State-change Notification"
    assert opened.fields["id"] == "6a7e8feb-b491-4cf7-a9f1-bf3703467718"
    assert opened.fields["resources"] == [
        "arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0"
    ]
    assert "detail" not in opened.fields


@pytest.mark.parametrize(
    ("kind", "body", "why"),
    [
        ("sns", "plain text", "not an SNS notification: the body is not JSON"),
        ("sns", "[1, 2]", "not an SNS notification: the body is JSON but not an object"),
        ("sns", EVENTBRIDGE_EVENT, "not an SNS notification: Type is missing"),
        ("sns", sns("x", Type="SubscriptionConfirmation"), "Type is 'SubscriptionConfirmation'"),
        ("sns", sns("x", Message={"a": 1}), "Message is not a string (dict)"),
        ("sns", json.dumps({"Type": "Notification", "Message": "x"}), "MessageId is missing"),
        ("eventbridge", SNS_NOTIFICATION, "not an EventBridge event: detail-type is missing"),
        ("eventbridge", "{", "not an EventBridge event: the body is not JSON"),
        ("eventbridge", '{"source": "a", "detail-type": "b"}', "detail is missing"),
        ("eventbridge", "[" * 100_000, "the body is not JSON"),
    ],
)
def test_a_body_that_is_not_the_envelope_is_refused_in_one_line(
    kind: Any, body: str, why: str
) -> None:
    with pytest.raises(EnvelopeError, match=re.escape(why)) as refused:
        unwrap(kind, body)
    assert "\n" not in str(refused.value)


# Any JSON value SNS could carry (no NaN: JSON has none), and any text.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES.filter(lambda value: not isinstance(value, str)))
def test_any_json_body_round_trips_through_an_sns_wrap(body: Any) -> None:
    wrapped = wrap("sns", body, message_id="m", sent_at=SENT)
    assert unwrap("sns", wrapped).body == body


@given(st.text())
def test_any_text_body_round_trips_through_an_sns_wrap_as_a_json_body_reads(text: str) -> None:
    # A text that is JSON reads as its value, as a JSON body does; any other text as itself.
    try:
        expected: Any = json.loads(text)
    except ValueError:
        expected = text
    opened = unwrap("sns", wrap("sns", text, message_id="m", sent_at=SENT))
    assert json.dumps(opened.body) == json.dumps(expected)  # NaN equals no NaN
    assert opened.fields["MessageId"] == "m"


@given(JSON_VALUES)
def test_any_json_detail_round_trips_through_an_eventbridge_wrap(detail: Any) -> None:
    opened = unwrap("eventbridge", wrap("eventbridge", detail, message_id="e", sent_at=SENT))
    assert opened.body == detail
    assert opened.fields["id"] == "e"


def test_wrap_is_shaped_as_aws_delivers_and_refuses_what_it_cannot_carry() -> None:
    fields = unwrap("sns", wrap("sns", "x", message_id="m", sent_at=SENT)).fields
    assert set(fields) == set(json.loads(SNS_NOTIFICATION)) - {
        "Message",
        "Subject",
        "MessageAttributes",
    }
    assert fields["Timestamp"] == "2023-11-14T22:13:20.000Z"
    event = unwrap("eventbridge", wrap("eventbridge", {}, message_id="e", sent_at=SENT)).fields
    assert set(event) == set(json.loads(EVENTBRIDGE_EVENT)) - {"detail"}
    with pytest.raises(MessageError, match="carries text or a JSON value, not bytes"):
        wrap("sns", b"x", message_id="m", sent_at=SENT)
    with pytest.raises(MessageError, match=r"^envelope='sqs' is invalid"):
        wrap("sqs", "x", message_id="m", sent_at=SENT)  # type: ignore[arg-type]


# -- screening with an envelope --------------------------------------------------------------


class Order(BaseModel):
    order: int


def screened(bodies: list[str], how: Screen, **envelope: Any) -> Any:
    found = [delivery(i, body, **envelope) for i, body in enumerate(bodies)]
    return screen(found, how, wall_now=SENT + 1, queue="q")


@pytest.mark.parametrize("kind", ENVELOPES)
def test_screening_unwraps_each_body_for_the_handler(kind: Any) -> None:
    body = wrap(kind, {"order": 1}, message_id="m", sent_at=SENT)
    found = screened([body], Screen(envelope=kind))
    [live] = found.live
    assert live.body == {"order": 1}
    assert live.outer is not None and live.outer[{"sns": "MessageId", "eventbridge": "id"}[kind]]
    assert live.raw_body == body  # what a re-send sends: the envelope and all
    assert live.message(Ledger(1), 0).envelope == live.outer


def test_screening_dead_letters_a_body_that_is_not_the_envelope_as_invalid_body() -> None:
    found = screened(["plain", sns('{"order": 2}')], Screen(envelope="sns"))
    assert [d.body for d in found.live] == [{"order": 2}]
    [doomed] = found.doomed
    assert (doomed.delivery.body, doomed.reason) == ("plain", INVALID_BODY)
    assert doomed.error == ErrorInfo(
        "EnvelopeError", "not an SNS notification: the body is not JSON", SENT + 1
    )


def test_body_model_validates_the_inner_message() -> None:
    how = Screen(body_model=BodyModel(Order), envelope="sns")
    found = screened([sns('{"order": 3}'), sns('{"order": "x"}')], how)
    assert [d.body for d in found.live] == [Order(order=3)]
    [doomed] = found.doomed
    assert doomed.error is not None and doomed.error.type == "ValidationError"
    assert doomed.error.message.startswith("order: Input should be a valid integer")


def test_without_an_envelope_a_notification_is_a_body_like_any_other() -> None:
    found = screened([SNS_NOTIFICATION], Screen(max_message_age=3600))
    assert found.live[0].body == SNS_NOTIFICATION and found.live[0].outer is None


def test_a_message_resting_on_its_dlq_from_an_invalid_body_reaches_the_handler_raw() -> None:
    # Dead-lettered as not an envelope, it is read from its DLQ (with the same setting): it
    # is not dead-lettered again, and the handler gets it as it is.
    died = (Death(INVALID_BODY, "source", 0, SENT),)
    found = screened(["plain"], Screen(envelope="sns"), content_type="text", deaths=died)
    assert [d.body for d in found.live] == ["plain"] and not found.doomed


def test_an_envelope_keeps_the_lambda_short_path_off() -> None:
    # The short path hands records to the handler as they came: with an envelope, never.
    assert nothing_to_take(Screening(CONTEXT, Screen()))
    assert not nothing_to_take(Screening(CONTEXT, Screen(envelope="eventbridge")))
    assert not Screen(envelope="sns").idle
