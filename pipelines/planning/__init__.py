"""The capacity planning model `folklore plan` prints and `mine` checks its streaming against: the arithmetic of a
plan (`capacity`), the costs an earlier run measured (`measured_costs`) and the plan made with them
(`capacity_plan`)."""
