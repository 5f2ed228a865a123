"""Tree speculation: token trees, their one-pass verification and the exact rules."""
