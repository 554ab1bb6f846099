"""Everything that touches a Lean process: REPL driver, sessions, the Ray pool and its router, verdict rules, the simulator."""
