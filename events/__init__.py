"""The event log: what happened, recorded once, in order, forever."""
