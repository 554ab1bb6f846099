"""The autoformalize family: informal mathematics into Lean statements (after Aria, FORMAL and ALA), and the
faithfulness check that a compiled statement still says what was asked (which mining runs too).

`direct` holds the skeleton every mode shares (retrieve, think, draft, repair); `got` and `agent` are the
Graph-of-Thought and tool-using modes, with their plain-data halves in `concept_graph` and `agent_tools`.
"""
