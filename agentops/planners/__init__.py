"""Model adapters: the scripted model (tests, drills) and an OpenAI-compatible endpoint. They
see only the contract's ModelContext; the runtime picks one per run
(``agentops.runtime.model_context.planner_for``)."""
