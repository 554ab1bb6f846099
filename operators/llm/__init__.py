"""The LLM layer: the OpenAI-compatible client and what its calls are made of (requests and results, errors,
settings, retries, context budgets, usage), the answer cache, prompts and answers, the sim server, Ray Serve LLM."""
