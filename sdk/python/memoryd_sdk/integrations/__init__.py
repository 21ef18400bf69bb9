"""memoryd inside agent frameworks: each module needs its framework, installed with the SDK's extra of that name.

``memoryd_sdk.integrations.openai_agents`` (``memoryd-sdk[openai-agents]``) and
``memoryd_sdk.integrations.pydantic_ai`` (``memoryd-sdk[pydantic-ai]``) recall a memoryd session's memories once
per user turn and give the model the session's memory tool as the framework's own tools.
"""
