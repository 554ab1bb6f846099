"""The LLM layer: the OpenAI-compatible client and operator base, prompts, the sim server, Ray Serve LLM."""
