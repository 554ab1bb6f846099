"""Code shared by the tests and the measurement scripts (benchmarks/): a moto S3 server on loopback
(`object_store`), a multi-node Ray cluster on one machine (`ray_nodes`), a real vLLM engine on the CPU with a proxy
that records what it was sent (`real_engine`), and the real Kimina Lean Server in a virtual environment of its own
(`real_kimina`, its files in `kimina_server_env/`). It sits on top of the three rooms, beside the tests: nothing in
pipelines, operators, lean_pool or conf imports it, and a benchmark reaches it without touching the tests."""
