"""The tool registry: every declared tool is complete; its exports say what its metadata says."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from accounts.models import Role
from accounts.selectors import user_roles
from agentops.contract import (
    ReceiptLookup,
    ReceiptStatus,
    SideEffect,
    ToolDescription,
    ToolMeta,
    ToolSpec,
    Verification,
    exports,
    success,
)
from agentops.runtime import registry

BOOKING_TOOLS = {
    "find_available_rooms",
    "reserve_room",
    "cancel_booking",
    "get_booking",
    "list_my_bookings",
}
DESCRIPTION_PARTS = (
    "summary",
    "when_to_use",
    "differs_from",
    "parameters",
    "constraints",
    "example",
)
KNOWN_ROLES = {r.value for r in Role}
# The only tools whose answers may pass the 4096-byte default, and why: a series lists up to
# 100 booked or skipped meetings (~100 bytes each), its cancellation up to 100 codes.
LARGER_OUTPUTS = {"reserve_series": 32768, "cancel_series": 8192}


def spec_problems(spec: ToolSpec) -> list[str]:
    """Everything a tool declaration lacks; empty when it is complete."""
    problems = []
    for part in DESCRIPTION_PARTS:
        value = getattr(spec.description, part, None)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"description.{part} is empty")
    m = spec.meta
    if not isinstance(m.readonly, bool):
        problems.append("meta.readonly is not a bool")
    if m.side_effect not in set(SideEffect):
        problems.append("meta.side_effect is not LOW/MEDIUM/HIGH")
    if not isinstance(m.enforced_idempotent, bool):
        problems.append("meta.enforced_idempotent is not a bool")
    if not isinstance(m.estimated_latency_ms, int) or m.estimated_latency_ms <= 0:
        problems.append("meta.estimated_latency_ms is not a positive int")
    if m.max_output_bytes != LARGER_OUTPUTS.get(spec.name, 4096):
        problems.append("meta.max_output_bytes is not the 4096 default")
    if not m.roles or not set(m.roles) <= KNOWN_ROLES:
        problems.append("meta.roles is empty or names an unknown role")
    if not m.readonly and (spec.lookup_receipt is None or spec.verify is None):
        problems.append("write tool without lookup_receipt/verify")
    if spec.input_model.model_json_schema().get("additionalProperties") is not False:
        problems.append("input schema accepts extra properties")
    return problems


# --- a small, valid tool to break on purpose ------------------------------------------------------


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    text: str


class _LooseIn(BaseModel):
    text: str


class _Out(BaseModel):
    echoed: str


def _handler(ctx: Any, args: BaseModel) -> dict[str, Any]:
    return success({"echoed": args.text})


def _lookup(key: str) -> ReceiptLookup:
    return ReceiptLookup(ReceiptStatus.ABSENT)


def _verify(receipt: dict[str, Any], ctx: Any) -> Verification:
    return Verification(True)


GOOD_DESCRIPTION = ToolDescription(
    summary="Echo a text.",
    when_to_use="In tests.",
    differs_from="Nothing else echoes.",
    parameters="text: any string.",
    constraints="Read-only.",
    example='{"text":"hi"} -> {"echoed":"hi"}',
)
READ_META = ToolMeta(
    readonly=True,
    side_effect=SideEffect.LOW,
    enforced_idempotent=False,
    estimated_latency_ms=10,
    roles=frozenset({"employees"}),
)
WRITE_META = dataclasses.replace(
    READ_META, readonly=False, side_effect=SideEffect.MEDIUM, enforced_idempotent=True
)


def _spec(**changes: Any) -> ToolSpec:
    fields = {
        "name": "echo_text",
        "description": GOOD_DESCRIPTION,
        "input_model": _In,
        "output_model": _Out,
        "meta": READ_META,
        "handler": _handler,
    }
    return ToolSpec(**(fields | changes))


def test_the_completeness_check_passes_a_complete_tool():
    assert spec_problems(_spec()) == []
    assert spec_problems(_spec(meta=WRITE_META, lookup_receipt=_lookup, verify=_verify)) == []


@pytest.mark.parametrize("part", DESCRIPTION_PARTS)
def test_the_completeness_check_catches_a_missing_description_part(part):
    broken = _spec(description=dataclasses.replace(GOOD_DESCRIPTION, **{part: "  "}))

    assert spec_problems(broken) == [f"description.{part} is empty"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"estimated_latency_ms": 0}, "meta.estimated_latency_ms is not a positive int"),
        ({"roles": frozenset()}, "meta.roles is empty or names an unknown role"),
        ({"roles": frozenset({"everyone"})}, "meta.roles is empty or names an unknown role"),
        ({"max_output_bytes": 1_000_000}, "meta.max_output_bytes is not the 4096 default"),
        ({"readonly": "yes"}, "meta.readonly is not a bool"),
    ],
)
def test_the_completeness_check_catches_bad_metadata(change, problem):
    broken = _spec(meta=dataclasses.replace(READ_META, **change))

    assert spec_problems(broken) == [problem]


def test_the_completeness_check_catches_an_input_model_that_accepts_extra_fields():
    assert spec_problems(_spec(input_model=_LooseIn)) == ["input schema accepts extra properties"]


def test_the_completeness_check_catches_a_write_tool_whose_lookup_receipt_went_missing():
    # The constructor refuses such a spec (next test); this one lost its lookup afterwards.
    spec = _spec(meta=WRITE_META, lookup_receipt=_lookup, verify=_verify)
    object.__setattr__(spec, "lookup_receipt", None)

    assert spec_problems(spec) == ["write tool without lookup_receipt/verify"]


@pytest.mark.parametrize(
    "reconciliation",
    [{}, {"verify": _verify}, {"lookup_receipt": _lookup}],
    ids=["neither", "no_lookup_receipt", "no_verify"],
)
def test_a_write_tool_without_lookup_receipt_and_verify_cannot_be_declared(reconciliation):
    with pytest.raises(
        ValueError, match="write tool echo_text must declare lookup_receipt and verify"
    ):
        _spec(meta=WRITE_META, **reconciliation)


def test_a_read_tool_needs_no_reconciliation_side():
    assert _spec().lookup_receipt is None


def test_declaring_another_tool_under_a_taken_name_is_refused():
    taken = registry.get("reserve_room")

    with pytest.raises(ValueError, match="tool reserve_room is declared twice"):
        registry.register(dataclasses.replace(_spec(), name="reserve_room"))
    assert registry.get("reserve_room") is taken


# --- the registered tools -----------------------------------------------------------------------


def test_the_five_booking_tools_are_registered():
    assert {s.name for s in registry.all_tools()} >= BOOKING_TOOLS
    assert all(registry.get(name).name == name for name in BOOKING_TOOLS)


def test_an_unregistered_name_is_not_found():
    assert registry.get("manage_rooms") is None


@pytest.mark.parametrize("spec", registry.all_tools(), ids=lambda s: s.name)
def test_every_registered_tool_is_complete(spec):
    assert spec_problems(spec) == []


@pytest.mark.parametrize("spec", registry.all_tools(), ids=lambda s: s.name)
def test_the_rendered_description_carries_all_six_parts_in_order(spec):
    text = spec.description.render()
    positions = [text.index(getattr(spec.description, part)) for part in DESCRIPTION_PARTS]

    assert positions == sorted(positions)
    for label in (
        "[When to use]",
        "[Not the same as]",
        "[Parameters]",
        "[Constraints and side effects]",
        "[Example]",
    ):
        assert label in text


def test_write_tools_are_the_reserve_change_and_cancel_tools_and_declare_reconciliation():
    writes = {s.name: s for s in registry.all_tools() if not s.meta.readonly}

    assert set(writes) == {
        "reserve_room",
        "change_booking",
        "cancel_booking",
        "reserve_series",
        "cancel_series",
    }
    for spec in writes.values():
        assert callable(spec.lookup_receipt)
        assert callable(spec.verify)
        assert spec.meta.enforced_idempotent is True
        assert spec.meta.side_effect == SideEffect.MEDIUM


def test_read_tools_are_low_risk():
    reads = [s for s in registry.all_tools() if s.meta.readonly]

    assert {s.name for s in reads} >= {"find_available_rooms", "get_booking", "list_my_bookings"}
    assert all(s.meta.side_effect == SideEffect.LOW for s in reads)


@pytest.mark.parametrize("spec", registry.all_tools(), ids=lambda s: s.name)
def test_input_schemas_refuse_extra_properties(spec):
    schema = exports.input_schema(spec)

    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False


def test_nested_output_models_refuse_extra_properties_too():
    schema = exports.output_schema(registry.get("find_available_rooms"))

    assert schema["$defs"]["RoomCandidate"]["additionalProperties"] is False


@pytest.mark.parametrize("spec", registry.all_tools(), ids=lambda s: s.name)
def test_the_openai_export_is_a_function_tool(spec):
    exported = exports.openai_function(spec)

    assert exported == {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description.render(),
            "parameters": exports.input_schema(spec),
        },
    }


@pytest.mark.parametrize("spec", registry.all_tools(), ids=lambda s: s.name)
def test_the_mcp_export_derives_annotations_from_the_metadata(spec):
    exported = exports.mcp_tool(spec)

    assert {"name", "description", "inputSchema", "outputSchema", "annotations"} <= set(exported)
    assert exported["name"] == spec.name
    assert exported["description"] == spec.description.render()
    assert exported["inputSchema"] == exports.input_schema(spec)
    data = {k: v for k, v in exports.output_schema(spec).items() if k != "$defs"}
    assert exported["outputSchema"]["properties"]["data"] == data
    assert exported["outputSchema"].get("$defs") == exports.output_schema(spec).get("$defs")
    hints = exported["annotations"]
    assert hints["readOnlyHint"] is spec.meta.readonly
    assert hints["destructiveHint"] is (not spec.meta.readonly)
    assert hints["idempotentHint"] is (spec.meta.readonly or spec.meta.enforced_idempotent)


def test_the_mcp_export_marks_reserve_room_as_a_destructive_idempotent_write():
    hints = exports.mcp_tool(registry.get("reserve_room"))["annotations"]

    assert hints["readOnlyHint"] is False
    assert hints["destructiveHint"] is True
    assert hints["idempotentHint"] is True


def test_the_mcp_export_marks_find_available_rooms_as_read_only():
    hints = exports.mcp_tool(registry.get("find_available_rooms"))["annotations"]

    assert hints["readOnlyHint"] is True
    assert hints["destructiveHint"] is False


def test_metadata_export_states_the_timeout_as_three_times_the_latency():
    exported = exports.metadata(registry.get("reserve_room"))

    assert exported == {
        "readonly": False,
        "side_effect": "MEDIUM",
        "enforced_idempotent": True,
        "estimated_latency_ms": 300,
        "timeout_ms": 900,
        "max_output_bytes": 4096,
        "roles": ["admins", "approvers", "employees"],
    }


@pytest.mark.django_db
def test_an_employee_sees_all_five_booking_tools(e17):
    assert {s.name for s in registry.visible_to(user_roles(user=e17))} >= BOOKING_TOOLS


@pytest.mark.django_db
def test_a_user_without_any_group_sees_no_tools(django_user_model):
    nobody = django_user_model.objects.create_user(username="nogroup", password="x")

    assert registry.visible_to(user_roles(user=nobody)) == []


@pytest.mark.django_db
def test_a_superuser_without_groups_counts_as_admin(django_user_model):
    root = django_user_model.objects.create_superuser(username="root", password="x")

    assert {s.name for s in registry.visible_to(user_roles(user=root))} >= BOOKING_TOOLS
