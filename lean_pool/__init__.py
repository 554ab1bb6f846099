"""Everything that touches a Lean process: REPL driver, sessions, the Ray pool, verdict rules, replay, the Kimina
client, the simulator.

The lowest room, which the other two import: so how every command line ends (`command_line`) and how Ray is started
and its workers set up (`ray_start`) live here too."""
