"""The fake OpenAI-compatible endpoint, for every test of the model adapters."""

from tests.agentops.planners.test_openai_adapter import endpoint  # noqa: F401 (the fixture)
