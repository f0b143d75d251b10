"""GPU checks of the examples: inputs, launch and reference, torch only."""
