"""The 2026-07-28 multi-round fixtures (SEP-2322): a call answers ``input_required`` with what
it needs from the client, and the client retries with ``inputResponses`` (and the echoed
``requestState``, which the server's ``RequestStateBoundary`` seals and verifies: each fixture
reads it as the plaintext it minted)."""

from __future__ import annotations

import mcp_types as types

from agentops.mcp.conformance._base import (
    CONFIRM_REQUEST,
    NAME_REQUEST,
    ROOTS_REQUEST,
    Ctx,
    Era,
    PromptAnswer,
    ToolAnswer,
    accepted,
    answer_of,
    declared_capabilities,
    elicit,
    needs_input,
    prompt,
    prompt_result,
    require,
    sample,
    sampled_text,
    state_of,
    text_result,
    tool,
    user_message,
)

# --- tools: input_required (2026-07-28, SEP-2322) ------------------------------------------------


@tool("test_input_required_result_elicitation", "Asks for a name, then greets.", era=Era.MODERN)
async def ir_elicitation(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    require(ctx, elicitation={})
    answer = accepted(params, "user_name")
    if answer is None or "name" not in answer:  # missing, wrong key or declined: ask again
        return needs_input({"user_name": NAME_REQUEST})
    return text_result(f"Hello, {answer['name']}!")


@tool("test_input_required_result_sampling", "Asks the client's LLM a question.", era=Era.MODERN)
async def ir_sampling(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    require(ctx, sampling={})
    answer = answer_of(params, "capital_question", types.CreateMessageResult)
    if answer is None:
        return needs_input({"capital_question": sample("What is the capital of France?", 100)})
    return text_result(f"LLM response: {sampled_text(answer)}")


@tool("test_input_required_result_list_roots", "Asks for the client's roots.", era=Era.MODERN)
async def ir_list_roots(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    require(ctx, roots={})
    answer = answer_of(params, "client_roots", types.ListRootsResult)
    if answer is None:
        return needs_input({"client_roots": ROOTS_REQUEST})
    return text_result("Roots: " + ", ".join(str(root.uri) for root in answer.roots))


@tool(
    "test_input_required_result_request_state",
    "Asks for a confirmation with a requestState, then checks the state.",
    era=Era.MODERN,
)
async def ir_request_state(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    require(ctx, elicitation={})
    if state_of(params).get("asked") == "confirm" and accepted(params, "confirm") is not None:
        return text_result("state-ok: the requestState came back as minted")
    return needs_input({"confirm": CONFIRM_REQUEST}, {"asked": "confirm"})


@tool(
    "test_input_required_result_multiple_inputs",
    "Asks for a name, a sampled greeting and the roots at once.",
    era=Era.MODERN,
)
async def ir_multiple_inputs(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    require(ctx, elicitation={}, sampling={}, roots={})
    name = accepted(params, "user_name")
    greeting = answer_of(params, "greeting", types.CreateMessageResult)
    roots = answer_of(params, "client_roots", types.ListRootsResult)
    if state_of(params).get("asked") != "all" or name is None or greeting is None or roots is None:
        return needs_input(
            {
                "user_name": NAME_REQUEST,
                "greeting": sample("Generate a greeting", 50),
                "client_roots": ROOTS_REQUEST,
            },
            {"asked": "all"},
        )
    return text_result(
        f"{sampled_text(greeting)} {name.get('name')}; {len(roots.roots)} root(s) received."
    )


@tool(
    "test_input_required_result_multi_round",
    "Asks for a name, then a colour, carrying the name in the requestState.",
    era=Era.MODERN,
)
async def ir_multi_round(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    require(ctx, elicitation={})
    state = state_of(params)
    if state.get("step") == 2:
        colour = accepted(params, "step2")
        if colour is not None and "color" in colour:
            return text_result(f"{state.get('name')} likes {colour['color']}.")
    elif state.get("step") == 1:
        name = accepted(params, "step1")
        if name is not None and "name" in name:
            ask = elicit("Step 2: What is your favorite color?", {"color": {"type": "string"}})
            return needs_input({"step2": ask}, {"step": 2, "name": name["name"]})
    ask = elicit("Step 1: What is your name?", {"name": {"type": "string"}})
    return needs_input({"step1": ask}, {"step": 1})


@tool(
    "test_input_required_result_tampered_state",
    "Asks for a confirmation with a sealed requestState (a tampered one is refused).",
    era=Era.MODERN,
)
async def ir_tampered_state(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    require(ctx, elicitation={})
    if state_of(params).get("asked") == "confirm" and accepted(params, "confirm") is not None:
        return text_result("Confirmed with an intact requestState.")
    return needs_input({"confirm": CONFIRM_REQUEST}, {"asked": "confirm"})


@tool(
    "test_input_required_result_capabilities",
    "Asks only for what the client declared it can answer.",
    era=Era.MODERN,
)
async def ir_capabilities(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    declared = declared_capabilities(ctx)
    wanted: dict[str, types.InputRequest] = {}
    if declared.elicitation is not None:
        wanted["user_name"] = NAME_REQUEST
    if declared.sampling is not None:
        wanted["capital_question"] = sample("What is the capital of France?", 100)
    if declared.roots is not None:
        wanted["client_roots"] = ROOTS_REQUEST
    outstanding = {k: v for k, v in wanted.items() if k not in (params.input_responses or {})}
    if outstanding:
        return needs_input(outstanding)
    return text_result(f"Answered: {', '.join(sorted(wanted)) or 'nothing was asked'}.")


@tool(
    "test_missing_capability",
    "Needs the sampling capability: without it the call is refused (-32021).",
    era=Era.MODERN,
)
async def missing_capability(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    require(ctx, sampling={})
    return await ir_sampling(ctx, params)


@tool(
    "test_streaming_elicitation",
    "Asks for a name in the response itself (input_required), never as a request on the stream.",
    era=Era.MODERN,
)
async def streaming_elicitation(ctx: Ctx, params: types.CallToolRequestParams) -> ToolAnswer:
    return await ir_elicitation(ctx, params)


@prompt(
    "test_input_required_result_prompt",
    "A prompt that first asks the user for its context (input_required).",
    era=Era.MODERN,
)
def input_required_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> PromptAnswer:
    answer = accepted(params, "user_context")
    if answer is None or "context" not in answer:
        ask = elicit("What context should the prompt use?", {"context": {"type": "string"}})
        return needs_input({"user_context": ask})
    text = f"Use this context: {answer['context']}"
    return prompt_result(user_message(types.TextContent(type="text", text=text)))
