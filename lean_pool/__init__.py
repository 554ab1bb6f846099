"""Everything that touches a Lean process: REPL driver, sessions, the Ray pool, verdict rules, replay, the Kimina client, the simulator."""
