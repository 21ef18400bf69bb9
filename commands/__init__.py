"""Commands: requests to change memories, validated and decided against the log."""
