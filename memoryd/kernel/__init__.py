"""The kernel: domain rules, text checks, errors, configuration, logging and the queue's health as one process
sees it. It imports no other floor."""
