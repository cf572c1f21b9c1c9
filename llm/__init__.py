"""The LLM client layer, below the nodes and the retrievers: backends (llama.cpp, OpenAI-compatible servers,
LangChain chat models), the `LLM` interface with retries and structured output, the reply cache, prompts and the
per-run context that carries usage, seed and cancellation."""
